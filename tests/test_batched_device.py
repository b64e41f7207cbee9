"""Batched shadow training (issue 14, item 3) and the --device option (item 6).

The CUDA tests skip on a machine without CUDA; there the CPU behaviour is what the rest of the
suite checks, and a request for ``cuda`` is refused before any work.
"""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from _autograd_mlp import fit_autograd
from recourse_privacy.audit import AuditConfig, run_audit
from recourse_privacy.cli import app
from recourse_privacy.errors import IncompatibleError, InvalidInputError
from recourse_privacy.models import make_model
from recourse_privacy.models.batched import fit_mlps_batched
from recourse_privacy.models.device import check_device, current_device, resolve_device, use_device
from recourse_privacy.recourse import SCFE
from recourse_privacy.recourse.cadex import CADEX

torch = pytest.importorskip("torch")
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
no_cuda = pytest.mark.skipif(CUDA, reason="checks the refusal on a machine without CUDA")


@pytest.fixture(scope="module")
def xy():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(240, 7))
    y = (X[:, 0] - 0.5 * X[:, 2] + 0.3 * rng.normal(size=240) > 0).astype(int)
    return X, y


def _rows(n: int, k: int, size: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.sort(rng.choice(n, size, replace=False)) for _ in range(k)]


@pytest.mark.parametrize(
    "kw",
    [
        dict(hidden_layers=(32,), lr=1e-2, batch_size=25),  # 120 rows: a last batch of 20
        dict(hidden_layers=(16, 8, 12), lr=1e-2, batch_size=32, weight_decay=1e-2),
    ],
)
def test_batched_training_follows_each_model_alone(xy, kw):
    """Same initialisation, same batch order, same Adam: each stacked network ends where autograd takes it alone.

    float32 with summation orders that differ between one network's matmul and the stacked
    one: logits of order 1 agree to about 1e-6 after a few epochs (1e-4 leaves room, while a
    different seed or batch order moves them by 1e-1).
    """
    X, y = xy
    rows = _rows(len(X), 3, 120)
    # the reference: nn.Module, autograd and torch.optim.Adam, one network at a time
    alone = [fit_autograd(make_model("mlp", random_state=k, epochs=3, **kw), X[r], y[r]) for k, r in enumerate(rows)]
    together = fit_mlps_batched([make_model("mlp", random_state=k, epochs=3, **kw) for k in range(3)], X, y, rows)
    # MLPModel.fit: the same trainer with a stack of one
    single = [make_model("mlp", random_state=k, epochs=3, **kw).fit(X[r], y[r]) for k, r in enumerate(rows)]
    for a, b, c in zip(alone, together, single):
        np.testing.assert_allclose(b.decision_function(X), a.decision_function(X), atol=1e-4)
        np.testing.assert_allclose(c.decision_function(X), a.decision_function(X), atol=1e-4)
        assert next(b.module_.parameters()).device.type == "cpu"
        assert next(c.module_.parameters()).device.type == "cpu"
    # the check has teeth: another seed's network is far away
    other = fit_autograd(make_model("mlp", random_state=7, epochs=3, **kw), X[rows[0]], y[rows[0]])
    assert np.abs(other.decision_function(X) - alone[0].decision_function(X)).max() > 1e-2


def test_batched_training_gives_the_same_models_for_any_thread_count(xy):
    """The stacked products split over models: one or two torch threads train bit-identical networks."""
    X, y = xy
    rows = _rows(len(X), 4, 120)
    before = torch.get_num_threads()
    fits = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            models = [make_model("mlp", hidden_layers=(64,), random_state=k, epochs=3) for k in range(4)]
            fits.append(np.stack([m.decision_function(X) for m in fit_mlps_batched(models, X, y, rows)]))
    finally:
        torch.set_num_threads(before)
    np.testing.assert_array_equal(fits[0], fits[1])


def test_batched_training_refuses_bad_rows(xy):
    X, y = xy
    models = [make_model("mlp", random_state=k, epochs=1, hidden_layers=(4,)) for k in range(2)]
    with pytest.raises(InvalidInputError, match=r"rows\[1\]"):
        fit_mlps_batched(models, X, y, [np.arange(10), np.array([0, len(X)])])
    with pytest.raises(InvalidInputError, match="2 models but 1 row sets"):
        fit_mlps_batched(models, X, y, [np.arange(10)])


def test_device_names_are_checked_before_work(tmp_path):
    with pytest.raises(InvalidInputError, match="device must be one of"):
        check_device("gpu")
    with pytest.raises(InvalidInputError, match="device"):
        make_model("mlp", device="gpu")
    with pytest.raises(InvalidInputError, match="device must be one of"):
        AuditConfig(device="tpu").validate()
    res = CliRunner().invoke(app, ["recourse", "--device", "gpu", "--out", str(tmp_path / "q")])
    assert res.exit_code == 2 and "--device must be one of" in res.output


def test_use_device_nests_and_auto_keeps_the_enclosing_choice():
    assert current_device() == "auto"
    with use_device("cpu"):
        assert current_device() == "cpu"
        with use_device("auto"):
            assert current_device() == "cpu"
            assert resolve_device().type == "cpu"
        with use_device(None):
            assert current_device() == "cpu"
    assert current_device() == "auto"
    assert resolve_device("auto").type == ("cuda" if CUDA else "cpu")


def test_device_keeps_the_digests_of_before_on_the_cpu():
    """Values computed on main before the device setting existed: on the CPU, caches and cell keys stay valid.

    Where ``auto`` resolves to CUDA the numbers differ in their float rounding, and so do the keys.
    """
    heloc = dict(dataset="heloc", model="mlp", recourse="scfe", n_members=3000)
    assert AuditConfig(device="cpu").digest() == "44136fa355b3678a"
    assert AuditConfig(device="cpu", **heloc).digest() == "117724aad8b5fd98"
    if CUDA:
        assert AuditConfig(**heloc).digest() != "117724aad8b5fd98"
    else:
        assert AuditConfig().digest() == "44136fa355b3678a"
        assert AuditConfig(**heloc).digest() == "117724aad8b5fd98"


@no_cuda
def test_cuda_is_refused_without_cuda(tmp_path):
    with pytest.raises(IncompatibleError, match="no CUDA device"):
        resolve_device("cuda")
    with pytest.raises(IncompatibleError, match="device 'cuda'"):
        AuditConfig(device="cuda").validate()
    with pytest.raises(IncompatibleError):
        make_model("mlp", epochs=1, device="cuda").fit(np.zeros((4, 2)), np.array([0, 1, 0, 1]))
    res = CliRunner().invoke(app, ["audit", "--device", "cuda", "--out", str(tmp_path / "a")])
    assert res.exit_code == 2 and "no CUDA device" in res.output
    res = CliRunner().invoke(app, ["reproduce", "pawelczyk2023-fig2", "--device", "cuda", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "no CUDA device" in res.output


@needs_cuda
def test_mlp_trains_on_cuda_like_on_cpu(xy):
    X, y = xy
    kw = dict(hidden_layers=(32,), lr=1e-2, batch_size=25, epochs=3, random_state=1)
    cpu = make_model("mlp", device="cpu", **kw).fit(X, y)
    gpu = make_model("mlp", device="cuda", **kw).fit(X, y)
    assert next(gpu.module_.parameters()).device.type == "cpu"  # fitted state lives on the CPU
    np.testing.assert_allclose(gpu.decision_function(X), cpu.decision_function(X), atol=1e-3)


@needs_cuda
def test_batched_training_on_cuda_follows_cpu(xy):
    X, y = xy
    rows = _rows(len(X), 3, 120)
    kw = dict(hidden_layers=(16, 8), lr=1e-2, batch_size=32, epochs=3)
    cpu = fit_mlps_batched([make_model("mlp", random_state=k, **kw) for k in range(3)], X, y, rows, device="cpu")
    gpu = fit_mlps_batched([make_model("mlp", random_state=k, **kw) for k in range(3)], X, y, rows, device="cuda")
    for a, b in zip(cpu, gpu):
        assert next(b.module_.parameters()).device.type == "cpu"
        np.testing.assert_allclose(b.decision_function(X), a.decision_function(X), atol=1e-3)


@needs_cuda
@pytest.mark.parametrize("method", [SCFE(max_iter=200), CADEX(max_iter=200)], ids=["scfe", "cadex"])
def test_gradient_recourse_on_cuda_matches_cpu(xy, method):
    X, y = xy
    model = make_model("mlp", random_state=0, epochs=5, hidden_layers=(32,), lr=1e-2).fit(X, y)
    rejected = X[model.predict(X) == 0][:40]
    with use_device("cpu"):
        cpu = method.generate(model, rejected)
    with use_device("cuda"):
        gpu = method.generate(model, rejected)
    assert next(model.module_.parameters()).device.type == "cpu"  # the model's own network did not move
    np.testing.assert_array_equal(gpu.valid, cpu.valid)
    np.testing.assert_allclose(gpu.counterfactuals, cpu.counterfactuals, atol=1e-3)


@needs_cuda
def test_audit_on_cuda(tmp_path):
    small = dict(
        dataset="synthetic",
        n_features=10,
        n_members=200,
        shadow_models=2,
        n_calibration=50,
        model="mlp",
        recourse="scfe",
        model_params={"epochs": 3, "hidden_layers": [16], "lr": 0.01},
        recourse_params={"max_iter": 100},
    )
    gpu = run_audit(AuditConfig(device="cuda", **small))
    cpu = run_audit(AuditConfig(device="cpu", **small))
    assert AuditConfig(device="cuda", **small).digest() != AuditConfig(device="cpu", **small).digest()
    assert abs(gpu.model.train_accuracy - cpu.model.train_accuracy) <= 0.01


@needs_cuda
def test_describe_and_module_on_device_name_the_gpu(xy):
    """``describe_device`` names the card; ``module_on_device`` moves a copy, never the fitted network."""
    from recourse_privacy.models.device import describe_device
    from recourse_privacy.models.torch_utils import module_on_device

    assert describe_device("cuda").startswith("cuda") and torch.cuda.get_device_name() in describe_device("cuda")
    X, y = xy
    model = make_model("mlp", random_state=0, epochs=2, hidden_layers=(16,)).fit(X, y)
    moved = module_on_device(model.torch_module(), "cuda")
    assert next(moved.parameters()).device.type == "cuda"
    assert next(model.torch_module().parameters()).device.type == "cpu"
    assert module_on_device(moved, "cuda") is moved  # already there: no second copy


@needs_cuda
@pytest.mark.parametrize("hidden", [(32,), (16, 8)], ids=["one-layer", "two-layer"])
def test_chain_logits_on_cuda_layers_follow_the_cpu_within_their_bounds(xy, hidden):
    """The search helpers of :mod:`~recourse_privacy.models.torch_utils` on a network that lives on the GPU.

    A user's network may be on CUDA: ``chain_logits``, ``shifted_chain_logits`` and
    ``affine_chain_logits`` then compute there. Their values equal the CPU's within the rounding
    bound the helpers themselves state (two float32 evaluations that differ only in how the sums
    are ordered), and the shifted and affine bounds hold against the module's own logits.
    """
    from recourse_privacy.models.torch_utils import (
        affine_chain_logits,
        chain_logits,
        chain_rounding_bound,
        linear_chain,
        module_on_device,
        shifted_chain_logits,
    )

    X, y = xy
    model = make_model("mlp", random_state=0, epochs=3, hidden_layers=hidden, lr=1e-2).fit(X, y)
    cpu_layers = linear_chain(model.torch_module())
    gpu_layers = linear_chain(module_on_device(model.torch_module(), "cuda"))
    assert gpu_layers[0][0].device.type == "cuda"
    bound = chain_rounding_bound(cpu_layers, X)
    diff = np.abs(chain_logits(gpu_layers, X).double().cpu().numpy() - chain_logits(cpu_layers, X).double().numpy())
    assert (diff <= bound).all()

    rng = np.random.default_rng(0)
    offsets = rng.normal(scale=0.3, size=(25, X.shape[1]))
    logits, err = shifted_chain_logits(gpu_layers, X[:30], offsets)
    own = model.decision_function((X[:30, None, :] + offsets[None]).reshape(-1, X.shape[1])).reshape(30, 25)
    assert (np.abs(logits - own) <= err[:, None]).all()

    q = 4
    A, a0 = rng.normal(size=(X.shape[1], q)), rng.normal(size=X.shape[1])
    H = np.abs(rng.normal(size=(30, 25, q)))
    logits, err = affine_chain_logits(gpu_layers, H, A, a0, np.zeros((30, q)))
    own = model.decision_function(H.reshape(-1, q) @ A.T + a0).reshape(30, 25)
    assert (np.abs(logits - own) <= (err if err.ndim == 2 else err[:, None])).all()


@needs_cuda
@pytest.mark.parametrize("name", ["gs", "cchvae", "revise"])
def test_black_box_recourse_under_a_cuda_block_equals_the_cpu(xy, name):
    """Growing Spheres, C-CHVAE and REVISE search on the CPU whatever the device block: the same counterfactuals."""
    from recourse_privacy.recourse import fit_for, make_recourse

    X, y = xy
    model = make_model("mlp", random_state=0, epochs=5, hidden_layers=(32,), lr=1e-2).fit(X, y)
    rejected = X[model.predict(X) == 0][:20]
    params = {"n_search_samples": 50, "max_iter": 50} if name != "revise" else {"max_iter": 50}
    out = []
    for device in ("cpu", "cuda"):
        with use_device(device):
            method = fit_for(make_recourse(name, random_state=0, **params), X, y, model)
            out.append(method.generate(model, rejected))
    np.testing.assert_array_equal(out[0].counterfactuals, out[1].counterfactuals)
    np.testing.assert_array_equal(out[0].valid, out[1].valid)
