"""Contract tests over the recourse registry, in the spirit of scikit-learn's ``parametrize_with_checks``.

Every entry of ``RECOURSE_METHODS`` is checked, so a newly registered method is tested by being
registered. Each check builds a tiny problem: 6 features (two of them binary, the immutable
ones of the action set), a logistic model for methods that need ``linear``, a small MLP for
the others; methods that learn from data are fitted with ``fit_for`` as the audit does.

Constructor parameters: ``PARAMS`` below gives each built-in entry small settings so that a
check runs in well under a second (fewer iterations and samples, a small VAE) plus what an
entry cannot do without (Laplace Recourse's ``epsilon`` and a private accountant, so the
tests never spend the process-wide default budget). An entry missing from the table is
built with its defaults; one that needs a parameter must add a row here. ``action_set``
and ``random_state`` are added wherever the constructor takes them.
"""

from __future__ import annotations

import copy
import functools
import inspect

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant

from recourse_privacy.errors import IncompatibleError, InvalidInputError
from recourse_privacy.models import make_model
from recourse_privacy.models.base import BaseClassifier
from recourse_privacy.recourse import RECOURSE_METHODS, ActionSet, RecourseResult, fit_for

SMALL_VAE = {"epochs": 2, "latent_dim": 3, "hidden_layers": (8,)}

#: per-entry constructor parameters (see the module docstring)
PARAMS: dict[str, dict] = {
    "linear": {},
    "scfe": {"max_iter": 100},
    "cadex": {"max_iter": 100},
    "dice": {"total_cfs": 2, "min_iter": 10, "max_iter": 50},
    "face": {"n_neighbors": 10},
    "gs": {"n_search_samples": 50, "max_iter": 100},
    "cchvae": {"n_search_samples": 30, "max_iter": 50, "vae_params": SMALL_VAE},
    "revise": {"max_iter": 50, "vae_params": SMALL_VAE},
    "laplace": {"epsilon": 1.0, "accountant": BudgetAccountant()},
    "dpc": {
        "bounds": "data",
        "encoder_layers": (4,),
        "ae_epochs": 2,
        "max_iter": 30,
    },  # laplace deep-copied: a fresh accountant each time
    "privrecourse": {"n_clusters": 20, "out_of_bounds": "clip"},
    "privrecourse-laplace": {"out_of_bounds": "clip"},
    "privrecourse-mst": {"out_of_bounds": "clip", "mst_params": {"iters": 50}},
    "privrecourse-data": {"out_of_bounds": "clip"},
}

#: entries whose ``valid`` may be stricter than the model's verdict on the counterfactual, and why
GIVES_UP = {
    "face": "a query with no reachable accepted node keeps itself as counterfactual and is flagged invalid "
    "even where the model already accepts it (no path, no recourse)",
    **{
        name: "Algorithm 2 (Pentyala et al. 2023): a query whose start node reaches no accepted node is flagged "
        "invalid (no path, no recourse)"
        for name in ("privrecourse", "privrecourse-laplace", "privrecourse-mst", "privrecourse-data")
    },
}

ENTRIES = RECOURSE_METHODS.entries()
IDS = [e.name for e in ENTRIES]
D = 6
IMMUTABLE = (3, 5)  # the binary features, so that FACE's immutable groups have many members


def takes(entry, param: str) -> bool:
    return param in inspect.signature(entry.obj).parameters


@functools.cache
def problem():
    """Data (X, y), a logistic model, a small MLP, a black box without gradients and the query rows."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, D))
    X[:, IMMUTABLE] = rng.integers(0, 2, size=(200, len(IMMUTABLE)))
    y = (X @ np.array([1.0, -2.0, 0.5, 1.0, 1.5, -1.0]) + 0.3 * rng.normal(size=200) > 0).astype(int)
    logistic = make_model("logistic").fit(X, y)
    mlp = make_model("mlp", hidden_layers=(8,), epochs=20, lr=1e-2, random_state=0).fit(X, y)
    return X, y, logistic, mlp, BlackBox(mlp), X[:12]  # the queries: rejected and accepted rows


class BlackBox(BaseClassifier):
    """A model that gives predictions only: neither linear nor differentiable."""

    def __init__(self, inner):
        self.inner, self.n_features_in_, self.fitted_ = inner, inner.n_features_in_, True

    def decision_function(self, X):
        return self.inner.decision_function(X)


def action_set() -> ActionSet:
    imm = np.zeros(D, bool)
    imm[list(IMMUTABLE)] = True
    return ActionSet(imm, np.zeros(D, bool), np.full(D, -np.inf), np.full(D, np.inf))


def model_for(entry):
    _, _, logistic, mlp, _, _ = problem()
    return logistic if "linear" in entry.needs else mlp


def build(entry, *, constrained: bool = False, random_state: int = 0):
    """A fresh instance of ``entry``'s method, fitted (``fit_for``) on the problem's data for its model."""
    X, y, *_ = problem()
    params = copy.deepcopy(PARAMS.get(entry.name, {}))
    if takes(entry, "random_state"):
        params["random_state"] = random_state
    if constrained:
        params["action_set"] = action_set()
    return fit_for(entry.obj(**params), X, y, model_for(entry))


@functools.cache
def result(name: str) -> RecourseResult:
    """The result of the entry on the query rows (computed once per entry)."""
    entry = RECOURSE_METHODS.get(name)
    return build(entry).generate(model_for(entry), problem()[-1])


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_result_is_aligned_with_the_factuals(entry):
    Q = problem()[-1]
    res = result(entry.name)
    n = len(Q)
    assert isinstance(res, RecourseResult) and res.method == entry.name
    np.testing.assert_array_equal(res.factuals, Q)  # the input rows, in order
    assert res.counterfactuals.shape == Q.shape
    assert res.valid.dtype == bool and res.valid.shape == (n,)
    assert res.n_iter is None or res.n_iter.shape == (n,)
    assert res.paths is None or len(res.paths) == n
    for norm in ("l0", "l1", "l2", "linf"):
        cost = res.distance(norm)
        assert cost.shape == (n,) and np.isfinite(cost).all() and (cost >= 0).all()
    assert res.valid.any(), "the tiny problem should give some recourse"


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_valid_is_the_models_own_verdict(entry):
    res = result(entry.name)
    accepted = model_for(entry).predict(res.counterfactuals) == 1
    if entry.name in GIVES_UP:  # valid only where the model accepts; see GIVES_UP for why it may be stricter
        assert not (res.valid & ~accepted).any()
        np.testing.assert_array_equal(res.counterfactuals[res.valid != accepted], res.factuals[res.valid != accepted])
    else:
        np.testing.assert_array_equal(res.valid, accepted)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_immutable_features_never_change(entry):
    if not takes(entry, "action_set"):
        pytest.skip(f"{entry.name} takes no action_set (e.g. Laplace Recourse: the DP mechanism moves along w)")
    Q = problem()[-1]
    res = build(entry, constrained=True).generate(model_for(entry), Q)
    imm = list(IMMUTABLE)
    np.testing.assert_array_equal(res.counterfactuals[:, imm], Q[:, imm])
    if "diverse" in res.info:  # all k counterfactuals of DiCE, not only the one reported
        np.testing.assert_array_equal(res.info["diverse"][:, :, imm], np.repeat(Q[:, None, imm], 2, axis=1))
    for path, x in zip(res.paths or (), Q):  # every point of FACE's paths
        np.testing.assert_array_equal(path[:, imm], np.broadcast_to(x[imm], path[:, imm].shape))


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_same_random_state_same_result(entry):
    """Randomized methods reproduce with the same random_state; deterministic ones always do."""
    first = result(entry.name)
    again = build(entry, random_state=0).generate(model_for(entry), problem()[-1])
    np.testing.assert_array_equal(again.counterfactuals, first.counterfactuals)
    np.testing.assert_array_equal(again.valid, first.valid)
    if first.n_iter is not None:
        np.testing.assert_array_equal(again.n_iter, first.n_iter)
    assert entry.meta["randomized"] == takes(entry, "random_state")


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_empty_batch_gives_an_empty_aligned_result(entry):
    res = build(entry).generate(model_for(entry), np.zeros((0, D)))
    assert res.factuals.shape == res.counterfactuals.shape == (0, D)
    assert res.valid.dtype == bool and res.valid.shape == (0,)
    assert res.n_iter is None or res.n_iter.shape == (0,)
    assert res.paths is None or len(res.paths) == 0
    assert np.isnan(res.validity)


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_wrong_number_of_columns_is_refused(entry):
    with pytest.raises(InvalidInputError, match=f"{D - 1} features; the model expects {D}"):
        build(entry).generate(model_for(entry), problem()[-1][:, :-1])


@pytest.mark.parametrize("entry", ENTRIES, ids=IDS)
def test_models_lacking_what_the_method_needs_are_refused(entry):
    """A method needing ``linear`` refuses the MLP; one needing ``gradients`` refuses a black box."""
    _, _, _, mlp, black_box, Q = problem()
    lacking = [m for need, m in (("linear", mlp), ("gradients", black_box)) if need in entry.needs]
    if not lacking:
        pytest.skip(f"{entry.name} needs nothing of the model")
    for model in lacking:
        with pytest.raises(IncompatibleError, match=repr(entry.name)):
            build(entry).generate(model, Q)
