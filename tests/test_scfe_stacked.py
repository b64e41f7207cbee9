"""SCFE for many reference worlds at once (recourse/scfe_stacked.py) and stacked training in groups (issue 28, item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from recourse_privacy.attacks.shadow import run_shadow_models
from recourse_privacy.models import make_model
from recourse_privacy.models.batched import fit_mlps_batched
from recourse_privacy.models.mlp_trainer import _fit_group
from recourse_privacy.recourse import SCFE
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.scfe_stacked import search_stacked, stack_chains

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def worlds():
    """Four small MLPs of one architecture on different halves of one data set, and each one's rejected rows."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=400) > 0).astype(int)
    rows = [np.sort(rng.choice(400, 200, replace=False)) for _ in range(4)]
    models = fit_mlps_batched(
        [make_model("mlp", hidden_layers=(32,), epochs=10, lr=1e-2, random_state=k) for k in range(4)], X, y, rows
    )
    queries = [[X[:100][m.predict(X[:100]) == 0], X[100:150][m.predict(X[100:150]) == 0]] for m in models]
    return models, queries


def _compare(method, models, queries):
    alone = [[method.generate(m, q) for q in qs] for m, qs in zip(models, queries)]
    twin = method.for_worlds(models, queries)
    together = [[twin.generate(m, q) for q in qs] for m, qs in zip(models, queries)]
    assert twin._plan.outputs is not None  # the stacked search ran (not the per-world fallback)
    return [(a, b) for pa, pb in zip(alone, together) for a, b in zip(pa, pb)]


@pytest.mark.parametrize(
    "kw",
    [
        dict(max_iter=300),  # every row found in the first round
        dict(max_iter=25, max_rounds=3),  # rows found in later rounds (lam decayed), some never: the last iterate
        dict(max_iter=60, norm="l2"),
    ],
)
def test_stacked_search_follows_each_world_alone(worlds, kw):
    """Each row gets the iteration and validity it gets alone; its counterfactual differs by float32 rounding only.

    Both searches run the same float32 arithmetic per row; only the matrix products' summation order
    differs (one bmm over the worlds against one addmm per world), about 1e-7 relative per step.
    Rows found agree to 1e-4 (a different lam or step count moves them by more than 1e-2, checked
    below); rows never found keep a last iterate that may drift further, and are compared by iteration.
    """
    models, queries = worlds
    pairs = _compare(SCFE(**kw), models, queries)
    n_found = n_lost = 0
    for a, b in pairs:
        np.testing.assert_array_equal(b.n_iter, a.n_iter)
        np.testing.assert_array_equal(b.valid, a.valid)
        found = a.n_iter >= 0
        np.testing.assert_allclose(b.counterfactuals[found], a.counterfactuals[found], atol=1e-4)
        n_found, n_lost = n_found + found.sum(), n_lost + (~found).sum()
    assert n_found > 80
    if kw.get("max_iter") == 25:
        assert n_lost > 0 and len({int(i) for a, _ in pairs for i in a.n_iter if i >= 25}) > 0  # later rounds ran
    other = SCFE(**{**kw, "lam": 0.2}).generate(models[0], queries[0][0])
    assert np.abs(other.counterfactuals - pairs[0][0].counterfactuals).max() > 1e-2


def test_stacked_search_honours_the_action_set(worlds):
    models, queries = worlds
    imm, inc = np.zeros(6, bool), np.zeros(6, bool)
    imm[2], inc[0] = True, True
    action = ActionSet(imm, inc, np.full(6, -np.inf), np.full(6, np.inf))
    for a, b in _compare(SCFE(max_iter=200, action_set=action), models, queries):
        np.testing.assert_array_equal(b.counterfactuals[:, 2], a.factuals[:, 2])
        assert (b.counterfactuals[:, 0] >= a.factuals[:, 0] - 1e-9).all()
        np.testing.assert_array_equal(b.n_iter, a.n_iter)


def test_unplanned_calls_and_unstackable_models_search_alone(worlds):
    models, queries = worlds
    twin = SCFE(max_iter=100).for_worlds(models, queries)
    other_rows = queries[0][0][:3] + 0.01
    np.testing.assert_array_equal(
        twin.generate(models[0], other_rows).counterfactuals,
        SCFE(max_iter=100).generate(models[0], other_rows).counterfactuals,
    )
    assert twin._plan.outputs is None  # nothing planned was asked: no stacked search
    wider = make_model("mlp", hidden_layers=(8,), epochs=1, random_state=0).fit(*_xy())
    assert stack_chains([models[0].torch_module(), wider.torch_module()]) is None
    assert search_stacked(SCFE(), [models[0].torch_module(), wider.torch_module()], queries[0]) is None


def _xy():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 6))
    return X, (X[:, 0] > 0).astype(int)


def test_training_in_stacks_and_threads_gives_the_networks_of_one_stack():
    """fit_mlps_batched splits 20 networks into stacks trained in two threads: the networks of one stack of 20.

    The same float32 operations per network; a stack's size may change the products' summation order
    (about 3e-8 on logits of order 0.1 after 2 epochs here; bit-identical at width 1,000). 1e-5 leaves
    room, while another seed's network is 1e-2 away.
    """
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 5))
    y = (X[:, 0] > 0).astype(int)
    rows = [np.sort(rng.choice(200, 100, replace=False)) for _ in range(20)]
    kw = dict(hidden_layers=(24,), epochs=2, lr=1e-2)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        split = fit_mlps_batched([make_model("mlp", random_state=k, **kw) for k in range(20)], X, y, rows)
    finally:
        torch.set_num_threads(before)
    whole = [make_model("mlp", random_state=k, **kw) for k in range(20)]
    _fit_group(whole, X, y, rows, torch.device("cpu"))
    for a, b in zip(split, whole):
        np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-5)
    assert np.abs(split[0].decision_function(X) - split[1].decision_function(X)).max() > 1e-2


def test_reference_worlds_read_the_stacked_search(monkeypatch):
    """run_shadow_models with SCFE on batched MLPs: the same statistics as with each world searched alone."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(500, 5))
    y = (X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=500) > 0).astype(int)
    pool, targets = slice(0, 400), slice(400, 500)

    def run():
        return run_shadow_models(
            lambda k: make_model("mlp", hidden_layers=(16,), epochs=5, lr=1e-2, random_state=k),
            SCFE(max_iter=200),
            X[pool],
            y[pool],
            X[targets],
            y[targets],
            n_shadow=4,
            n_calibration=100,
            random_state=0,
            online=True,
        )

    calls = []
    original = SCFE.for_worlds
    monkeypatch.setattr(SCFE, "for_worlds", lambda self, *a: calls.append(1) or original(self, *a))
    stacked = run()
    assert calls == [1]
    monkeypatch.delattr(SCFE, "for_worlds")
    alone = run()
    np.testing.assert_array_equal(stacked.usable_targets, alone.usable_targets)
    np.testing.assert_array_equal(stacked.usable_calib, alone.usable_calib)
    np.testing.assert_allclose(stacked.cfd_targets, alone.cfd_targets, atol=1e-3)
    np.testing.assert_allclose(stacked.cfd_calib, alone.cfd_calib, atol=1e-3)
    assert stacked.usable_targets.sum() > 50


def test_large_worlds_are_searched_each_alone_in_threads(worlds, monkeypatch):
    """Above STACK_BELOW the plan runs each world's own search (two Python threads): the same iterations, and
    counterfactuals equal to float32 rounding (one unit in the last place, 1.2e-7 at magnitude 1; 2% of
    entries differ by that much, as a product's kernel may differ in another thread)."""
    import recourse_privacy.recourse.scfe_stacked as stacked

    models, queries = worlds
    monkeypatch.setattr(stacked, "STACK_BELOW", 0)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        pairs = _compare(SCFE(max_iter=100), models, queries)
    finally:
        torch.set_num_threads(before)
    for a, b in pairs:
        np.testing.assert_allclose(b.counterfactuals, a.counterfactuals, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(b.n_iter, a.n_iter)


@pytest.mark.parametrize("hidden", [(), (32,), (16, 8, 12)])
def test_stacked_input_gradients_are_autograds(hidden):
    """The stacked search's written-out gradient equals autograd's through each world's own network (float32
    rounding: the sums run in another order; a wrong mask or layer moves a gradient by its own size)."""
    from recourse_privacy.recourse.scfe_stacked import _logits_and_input_grad

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    if hidden:
        models = [make_model("mlp", hidden_layers=hidden, epochs=2, lr=1e-2, random_state=k) for k in range(3)]
        modules = [m.module_ for m in fit_mlps_batched(models, X, y, [np.arange(300)] * 3)]
    else:
        from recourse_privacy.models import TorchModel

        modules = [TorchModel(torch.nn.Sequential(torch.nn.Linear(6, 1)), n_features=6).module_ for _ in range(3)]
    xs = torch.as_tensor(rng.normal(size=(3, 50, 6)), dtype=torch.float32)
    z, g = _logits_and_input_grad(stack_chains(modules), xs)
    for k, module in enumerate(modules):
        x = xs[k].clone().requires_grad_(True)
        ref = module(x)
        ref.sum().backward()
        torch.testing.assert_close(z[k], ref.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g[k], x.grad, rtol=1e-5, atol=1e-5 * float(x.grad.abs().max()))
        assert float(x.grad.abs().max()) > 1e-2
