"""Recourse a person can act on: every registered method, given a structural action set, returns rows
whose one-hot groups are a single valid category and whose integer features are integers, and
``valid`` is the model's verdict on those rows (after the driver's projection and repair).

The data: a 3-level categorical, a binary categorical, an integer column and two real columns,
encoded by the Preprocessor; the action set is ``ActionSet.from_preprocessor(pre, actionable=False)``
(structure only), as engineer A's user-data path passes it.
"""

from __future__ import annotations

import copy
import functools
import inspect

import numpy as np
import pandas as pd
import pytest
from diffprivlib.accountant import BudgetAccountant

from recourse_privacy.data import Preprocessor
from recourse_privacy.models import make_model
from recourse_privacy.recourse import RECOURSE_METHODS, ActionSet, GrowingSpheres, LinearRecourse, fit_for
from recourse_privacy.recourse.base import project_and_repair

SMALL_VAE = {"epochs": 3, "latent_dim": 3, "hidden_layers": (8,)}
PARAMS: dict[str, dict] = {
    "scfe": {"max_iter": 200},
    "cadex": {"max_iter": 100},
    "dice": {"total_cfs": 2, "min_iter": 10, "max_iter": 100},
    "face": {"n_neighbors": 10},
    "gs": {"n_search_samples": 100, "max_iter": 200},
    "cchvae": {"n_search_samples": 50, "max_iter": 100, "vae_params": SMALL_VAE},
    "revise": {"max_iter": 100, "vae_params": SMALL_VAE},
    "laplace": {"epsilon": 1.0, "accountant": BudgetAccountant()},
    "dpc": {"bounds": "data", "ae_epochs": 100, "max_iter": 50},  # 200 Adam steps: a decoder that has not collapsed
    "privrecourse": {"n_clusters": 20, "out_of_bounds": "clip"},
    "privrecourse-laplace": {"out_of_bounds": "clip"},
    "privrecourse-mst": {"out_of_bounds": "clip", "mst_params": {"iters": 50}},
    "privrecourse-data": {"out_of_bounds": "clip"},
}
TAKING = [e for e in RECOURSE_METHODS.entries() if "action_set" in inspect.signature(e.obj).parameters]


def _frame(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "income": rng.normal(50.0, 10.0, n),
            "debt": rng.normal(10.0, 3.0, n),
            "years": rng.integers(0, 30, n),
            "home": rng.choice(["rent", "own", "mortgage"], n),
            "sex": rng.choice(["F", "M"], n),
        }
    )
    logit = (
        0.15 * (X["income"] - 50) - 0.3 * (X["debt"] - 10) + 0.08 * (X["years"] - 15) + 1.2 * (X["home"] == "own") - 0.5
    )
    y = (logit + rng.logistic(size=n) * 0.5 > 0).astype(int).to_numpy()
    return X, y


@functools.cache
def problem():
    """Encoded training data, the preprocessor, a logistic model, a small MLP and rejected query rows."""
    X, y = _frame(400, 0)
    pre = Preprocessor().fit(X)
    Z = pre.transform(X)
    logistic = make_model("logistic").fit(Z, y)
    mlp = make_model("mlp", hidden_layers=(16,), epochs=30, lr=1e-2, random_state=0).fit(Z, y)
    Q = Z[(logistic.predict(Z) == 0) & (mlp.predict(Z) == 0)][:30]
    return Z, y, pre, logistic, mlp, Q


def _model(entry):
    _, _, _, logistic, mlp, _ = problem()
    return logistic if "linear" in entry.needs else mlp


def _build(entry, action_set):
    Z, y, *_ = problem()
    params = copy.deepcopy(PARAMS.get(entry.name, {}))
    if "random_state" in inspect.signature(entry.obj).parameters:
        params["random_state"] = 0
    return fit_for(entry.obj(action_set=action_set, **params), Z, y, _model(entry))


def _decoded_valid(pre: Preprocessor, X_cf: np.ndarray) -> np.ndarray:
    """Per row: every group a single valid level (encoded) and every integer an integer (decoded)."""
    aset = ActionSet.from_preprocessor(pre, actionable=False)
    ok = aset.structural_violations(X_cf) == 0
    back = pre.inverse_transform(X_cf)
    raw_years = X_cf[:, pre.feature_names_out_.index("years")] * pre.unit_scale_[pre.feature_names_out_.index("years")]
    raw_years += pre.unit_offset_[pre.feature_names_out_.index("years")]
    assert back["home"].isin(["rent", "own", "mortgage"]).all() and back["sex"].isin(["F", "M"]).all()
    return ok & np.isclose(raw_years, np.round(raw_years), atol=1e-9)


@pytest.mark.parametrize("entry", TAKING, ids=[e.name for e in TAKING])
def test_every_counterfactual_is_a_valid_person(entry):
    _, _, pre, *_, Q = problem()
    aset = ActionSet.from_preprocessor(pre, actionable=False)
    res = _build(entry, aset).generate(_model(entry), Q)
    assert _decoded_valid(pre, res.counterfactuals).all()
    accepted = _model(entry).predict(res.counterfactuals) == 1
    assert not (res.valid & ~accepted).any()  # valid is judged on the projected rows
    if entry.name not in ("face",) and not entry.name.startswith("privrecourse"):
        np.testing.assert_array_equal(res.valid, accepted)
    for path in res.paths or ():
        assert _decoded_valid(pre, path).all()


def test_growing_spheres_leaves_no_fractional_category():
    """The issue's example: GS made the one-hot home_ownership fractional in every row; on the valid set, none."""
    _, _, pre, _, mlp, Q = problem()
    before = GrowingSpheres(n_search_samples=100, max_iter=200, random_state=0).generate(mlp, Q)
    after = GrowingSpheres(
        n_search_samples=100,
        max_iter=200,
        random_state=0,
        action_set=ActionSet.from_preprocessor(pre, actionable=False),
    ).generate(mlp, Q)
    home = next(g for g in pre.groups_ if g.column == "home").index

    def frac(C):
        return (~np.isclose(C[:, home], pre.lower_[home]) & ~np.isclose(C[:, home], pre.upper_[home])).any(axis=1)

    assert frac(before.counterfactuals[before.valid]).mean() > 0.5  # the bug this fixes
    assert frac(after.counterfactuals).sum() == 0
    assert after.validity >= 0.8 * before.validity


def test_linear_enumerates_level_switches_exactly():
    """With groups, linear recourse is the cheapest of every single-level switch plus the closed-form move."""
    _, _, pre, logistic, _, Q = problem()
    aset = ActionSet.from_preprocessor(pre, actionable=False)
    res = LinearRecourse(norm="l2", action_set=aset).generate(logistic, Q)
    assert res.valid.all() and _decoded_valid(pre, res.counterfactuals).all()
    # brute force over the switches of the 'home' group (the binary 'sex' too), continuous move in closed form
    w, b = logistic.coef_, logistic.intercept_
    cont = ~aset.in_group
    best = np.full(len(Q), np.inf)
    for g_home in [None, *range(3)]:
        for g_sex in [None, 0, 1]:
            if g_home is not None and g_sex is not None:
                continue  # one group at a time
            C = Q.copy()
            for g, k in ((aset.groups[0], g_home), (aset.groups[1], g_sex)):
                if k is not None:
                    C[:, g.index] = np.where(np.arange(g.size) == k, g.on, g.off) if k < g.size else g.off
            gap = np.maximum(1e-6 - (C @ w + b), 0)
            wc = np.where(cont, w, 0)
            C = C + np.outer(gap / (wc @ wc), wc)
            best = np.minimum(best, np.linalg.norm(C - Q, axis=1))
    # the released row differs from the optimum only by the integer rounding of 'years' (one step at most)
    j = pre.feature_names_out_.index("years")
    assert (res.distance("l2") <= best + abs(1 / pre.unit_scale_[j]) + 1e-9).all()
    assert (res.distance("l2") >= best - 1e-9).all()


def test_repair_rounds_integers_away_and_switches_levels():
    """A continuous optimum whose rounding loses acceptance is repaired on the valid set."""
    _, _, pre, logistic, _, Q = problem()
    aset = ActionSet.from_preprocessor(pre, actionable=False)
    raw = LinearRecourse(norm="l2").generate(logistic, Q).counterfactuals  # continuous, barely accepted
    P, stats = project_and_repair(aset, logistic, Q, raw, "l1")
    assert (aset.structural_violations(P) == 0).all()
    naive = aset.project(raw, Q)
    lost = (logistic.predict(raw) == 1) & (logistic.predict(naive) == 0)
    assert stats["n_projection_lost"] == lost.sum() > 0
    assert stats["n_repaired"] == lost.sum() and (logistic.predict(P) == 1).all()
    np.testing.assert_array_equal(P[~lost], naive[~lost])


def test_no_action_set_no_projection():
    """Without an action set (or with one without structure) the driver leaves the search's rows as they are."""
    Z, y, _, _, mlp, Q = problem()
    res = GrowingSpheres(n_search_samples=100, max_iter=200, random_state=0).generate(mlp, Q)
    assert "n_repaired" not in res.info
    plain = ActionSet.unconstrained(Z.shape[1])
    again = GrowingSpheres(n_search_samples=100, max_iter=200, random_state=0, action_set=plain).generate(mlp, Q)
    np.testing.assert_array_equal(res.counterfactuals, again.counterfactuals)
