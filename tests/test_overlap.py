"""Both cores in the audit: the owner's stages beside the shadow models, worlds queried in two threads.

Same seed, same numbers as the stages one after another; torch's thread count safe under concurrent
callers; a failure on either side raised as itself, never a hang.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
import torch

import recourse_privacy.attacks.shadow as shadow
import recourse_privacy.audit.pipeline as pipeline
import recourse_privacy.audit.stages as stages
from recourse_privacy.audit import AuditConfig, play_audit
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models import make_model
from recourse_privacy.models.mlp import MLPModel
from recourse_privacy.models.torch_utils import torch_threads

# an MLP owner and an offline shadow set of MLPs trained together: the case that overlaps
GAME = dict(
    dataset="synthetic",
    n_features=6,
    n_members=200,
    model="mlp",
    model_params={"hidden_layers": (16,), "epochs": 15, "lr": 0.01},
    recourse="gs",
    recourse_params={"random_state": 0},
    attacks=("cfd", "cfd-lrt", "loss-lrt"),
    shadow_models=4,
    n_calibration=100,
    seed=5,
)


@pytest.fixture
def two_cores(monkeypatch):
    """The overlapped path on any machine (a one-core runner would otherwise play the stages in order)."""
    monkeypatch.setattr("recourse_privacy.processes.usable_cpus", lambda: 2)
    monkeypatch.delenv(pipeline.OVERLAP_ENV, raising=False)


def _play(monkeypatch, overlap: str, **kw):
    monkeypatch.setenv(pipeline.OVERLAP_ENV, overlap)
    return play_audit(AuditConfig(**{**GAME, **kw}), cache="off")


def test_overlapped_audit_gives_bit_identical_numbers_to_the_stages_in_order(two_cores, monkeypatch):
    in_order = _play(monkeypatch, "0")
    beside = _play(monkeypatch, "1")
    assert "overlapped" not in in_order.timing_seconds and "overlapped" in beside.timing_seconds
    assert set(beside.timing_seconds) >= {"owner model", "recourse", "shadow models", "total"}
    assert beside.attacks == in_order.attacks
    for name in GAME["attacks"]:
        np.testing.assert_array_equal(beside.arrays.scores[name].scores, in_order.arrays.scores[name].scores)
    np.testing.assert_array_equal(beside.arrays.recourse.counterfactuals, in_order.arrays.recourse.counterfactuals)
    assert beside.shadow == in_order.shadow and beside.model == in_order.model
    # the overlap is the two sides' sum less their wall time: never more than the shorter side
    t = beside.timing_seconds
    assert 0 <= t["overlapped"] <= min(t["owner model"] + t["recourse"], t["shadow models"]) + 1e-3


def test_beside_the_owner_the_shadow_stacks_train_at_once(two_cores, monkeypatch):
    """Torch's threads are held at one for both sides, yet the shadow stacks (two on two cores) train side by side,
    not one after another (a pool of one worker would start the second only when the first had ended)."""
    import recourse_privacy.models.mlp_trainer as trainer

    spans, fit_group = [], trainer._fit_group

    def timed(models, *args, **kw):
        start = time.perf_counter()
        fit_group(models, *args, **kw)
        spans.append((len(models), start, time.perf_counter()))

    monkeypatch.setattr(trainer, "_fit_group", timed)
    _play(monkeypatch, "1")
    shadow = sorted((s, e) for k, s, e in spans if k > 1)  # the owner's network is a stack of one
    assert len(shadow) == 2 and shadow[1][0] < shadow[0][1]


def test_overlap_only_where_the_shadow_set_does_not_wait_for_the_owner(two_cores):
    offline = AuditConfig(**GAME).validate()
    assert pipeline.overlaps(offline, False, spare=True)
    assert not pipeline.overlaps(offline, False, spare=False)  # no second core free
    assert not pipeline.overlaps(offline, True, spare=True)  # a deployed instance is never trained
    # online reference models train on the targets, which the owner's model decides: in order
    shared = AuditConfig(**{**GAME, "attacks": ("cfd-lrt", "cfd-lrt-online")}).validate()
    assert stages.shares_references(shared) and not pipeline.overlaps(shared, False, spare=True)
    assert not pipeline.overlaps(AuditConfig(**{**GAME, "attacks": ("cfd",)}).validate(), False, spare=True)
    # models that do not train together: nothing worth training ahead
    mlp = lambda k: make_model("mlp", random_state=k, **GAME["model_params"])  # noqa: E731
    assert pipeline.overlaps(offline, False, None, mlp, spare=True)
    assert not pipeline.overlaps(offline, False, None, lambda k: make_model("logistic", random_state=k), spare=True)


def test_auto_reads_the_idle_cpus_of_now(two_cores, monkeypatch):
    """``auto`` samples /proc/stat: a load average that still counts finished work does not decide."""
    monkeypatch.delenv(pipeline.OVERLAP_ENV, raising=False)
    monkeypatch.setattr(shadow.os, "getloadavg", lambda: (2.0, 2.0, 2.0))  # the last minute busy
    monkeypatch.setattr("recourse_privacy.processes.idle_cpus", lambda *a, **k: 1.9)
    assert shadow.spare_core() and shadow.query_workers(10) == 2
    monkeypatch.setattr("recourse_privacy.processes.idle_cpus", lambda *a, **k: 1.1)  # another process on a core
    assert not shadow.spare_core() and shadow.query_workers(10) == 1


def test_the_idle_cpus_are_sampled_only_where_a_second_core_would_work(two_cores, monkeypatch):
    """The 0.2 s sample is taken once for an audit with reference MLPs trained together, never for one without."""
    calls = []
    monkeypatch.setattr("recourse_privacy.processes.idle_cpus", lambda *a, **k: calls.append(1) or 2.0)
    monkeypatch.delenv(pipeline.OVERLAP_ENV, raising=False)
    small = {**GAME, "n_members": 80, "n_calibration": 40, "shadow_models": 2}
    play_audit(AuditConfig(**{**small, "model": "logistic", "model_params": {}}), cache="off")
    assert calls == []
    beside = play_audit(AuditConfig(**small), cache="off")
    assert calls == [1] and "overlapped" in beside.timing_seconds


def test_idle_cpus_are_read_from_proc_stat(tmp_path, monkeypatch):
    import time

    from recourse_privacy import processes

    real = processes.idle_cpus(0.05)
    if real is not None:  # Linux: a share of the machine's CPUs
        assert 0 <= real <= (os.cpu_count() or 1) + 1e-9
    stat = tmp_path / "stat"
    lines = iter(["cpu  100 0 50 1000 10 0 0 0 0 0\n", "cpu  160 0 70 1150 20 0 0 0 0 0\n"])
    stat.write_text(next(lines))
    monkeypatch.setattr(time, "sleep", lambda s: stat.write_text(next(lines)))  # the second read after the sleep
    monkeypatch.setattr(processes.os, "cpu_count", lambda: 2)
    # between the reads: 60 + 20 busy, 150 + 10 idle of 240 jiffies: 2 CPUs x 160 / 240
    assert processes.idle_cpus(0.0, str(stat)) == pytest.approx(2 * 160 / 240)
    assert processes.idle_cpus(0.0, str(tmp_path / "absent")) is None


def test_a_second_core_is_used_where_one_is_free_or_where_asked(two_cores, monkeypatch):
    monkeypatch.delenv(pipeline.OVERLAP_ENV, raising=False)
    monkeypatch.setattr("recourse_privacy.processes.idle_cpus", lambda *a, **k: None)  # no /proc/stat: the load average
    monkeypatch.setattr(shadow.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert shadow.spare_core()  # unset: auto, and a core is idle
    monkeypatch.setattr(shadow.os, "getloadavg", lambda: (1.7, 1.0, 1.0))
    assert not shadow.spare_core()  # unset: auto, and both cores are busy
    monkeypatch.setenv(pipeline.OVERLAP_ENV, "auto")
    monkeypatch.setattr(shadow.os, "getloadavg", lambda: (1.2, 1.0, 1.0))
    assert shadow.spare_core() and shadow.query_workers(10) == 2 and shadow.query_workers(1) == 1
    monkeypatch.setattr(shadow.os, "getloadavg", lambda: (3.5, 3.0, 3.0))  # both cores held by other work
    assert not shadow.spare_core() and shadow.query_workers(10) == 1
    monkeypatch.setenv(pipeline.OVERLAP_ENV, "1")
    assert shadow.spare_core() and shadow.query_workers(10) == 2
    monkeypatch.setenv(pipeline.OVERLAP_ENV, "off")
    monkeypatch.setattr(shadow.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert not shadow.spare_core() and shadow.query_workers(10, spare=True) == 2
    monkeypatch.setenv(pipeline.OVERLAP_ENV, "1")
    monkeypatch.setattr("recourse_privacy.processes.usable_cpus", lambda: 1)
    assert not shadow.spare_core() and shadow.query_workers(10, spare=True) == 1


def _in_thread(fn, seconds: float = 120.0):
    """``fn()``'s exception (None if it returned) from a thread given ``seconds``: a hang fails, not blocks."""
    caught: list[BaseException | None] = [None]

    def target():
        try:
            fn()
        except BaseException as err:  # noqa: BLE001 - handed to the test
            caught[0] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the audit hung"
    return caught[0]


def test_a_failure_of_the_owner_side_is_raised_as_itself(two_cores, monkeypatch):
    def owner_fails(*args, **kwargs):
        raise InvalidInputError("the owner's side failed")

    monkeypatch.setattr(stages, "train_owner", owner_fails)
    err = _in_thread(lambda: _play(monkeypatch, "1"))
    assert isinstance(err, InvalidInputError) and "the owner's side failed" in str(err)
    assert not [t for t in threading.enumerate() if t.name == "audit-owner"]  # joined, not left running


def test_a_failure_of_the_shadow_side_is_raised_and_the_owners_first(two_cores, monkeypatch):
    def ahead_fails(*args, **kwargs):
        raise InvalidInputError("the shadow side failed")

    monkeypatch.setattr(stages, "shadow_models_ahead", ahead_fails)
    err = _in_thread(lambda: _play(monkeypatch, "1"))
    assert isinstance(err, InvalidInputError) and "the shadow side failed" in str(err)

    def owner_fails(*args, **kwargs):
        raise InvalidInputError("the owner's side failed")

    monkeypatch.setattr(stages, "train_owner", owner_fails)  # both fail: the owner's, as the stages in order would
    err = _in_thread(lambda: _play(monkeypatch, "1"))
    assert "the owner's side failed" in str(err)


def test_torch_threads_under_concurrent_callers():
    """Two threads' blocks overlap: 1 thread in effect while either holds, the setting from before after both."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        a_in, a_out, b_in = threading.Event(), threading.Event(), threading.Event()
        seen: dict[str, int] = {}

        def fresh() -> int:  # what a thread started now runs with: the process-wide setting
            out = []
            t = threading.Thread(target=lambda: out.append(torch.get_num_threads()))
            t.start()
            t.join()
            return out[0]

        def first():
            with torch_threads(1):
                seen["a inside"] = torch.get_num_threads()
                a_in.set()
                b_in.wait(30)
            a_out.set()

        def second():
            a_in.wait(30)
            with torch_threads(1):
                b_in.set()
                a_out.wait(30)  # the first block has left; this one still holds
                seen["b after a left"] = torch.get_num_threads()
                seen["new thread while b holds"] = fresh()

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert seen == {"a inside": 1, "b after a left": 1, "new thread while b holds": 1}
        assert fresh() == 2 and torch.get_num_threads() == 2  # restored once both left
        # nested in one thread: the smaller count while the inner block runs, the outer's after
        with torch_threads(2):
            with torch_threads(1):
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 2
        with pytest.raises(InvalidInputError, match="n must be"):
            with torch_threads(0):
                pass
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_mlp_initial_weights_are_torchs_own_from_a_private_generator():
    """nn.Linear's initialisation under torch.manual_seed(seed), without reading or moving the global generator."""
    from torch import nn

    seed = 1234
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        expected = [nn.Linear(5, 8), nn.Linear(8, 3), nn.Linear(3, 1)]
    state = torch.get_rng_state()
    built = MLPModel(hidden_layers=(8, 3))._build(5, seed)
    assert torch.equal(torch.get_rng_state(), state)
    layers = [m for m in built.modules() if isinstance(m, nn.Linear)]
    assert len(layers) == 3
    for got, want in zip(layers, expected):
        assert torch.equal(got.weight, want.weight) and torch.equal(got.bias, want.bias)
    assert not torch.equal(layers[0].weight, MLPModel(hidden_layers=(8, 3))._build(5, seed + 1).net[0].weight)


@pytest.mark.parametrize("method", ["gs", "scfe"])  # scfe: planned across the worlds (for_worlds), first query here
def test_worlds_queried_in_two_threads_give_the_numbers_of_one(monkeypatch, method):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + 0.5 * rng.normal(size=400) > 0).astype(int)
    X_t, y_t = X[:60] + 0.1, y[:60]
    from recourse_privacy.recourse.growing_spheres import GrowingSpheres
    from recourse_privacy.recourse.scfe import SCFE

    planned = []
    if method == "scfe":
        real = SCFE.for_worlds
        monkeypatch.setattr(SCFE, "for_worlds", lambda self, *a: planned.append(1) or real(self, *a))

    def run():
        return shadow.run_shadow_models(
            lambda k: MLPModel(hidden_layers=(8,), epochs=5, lr=0.01, random_state=k),
            GrowingSpheres(random_state=0) if method == "gs" else SCFE(max_iter=30),
            X,
            y,
            X_t,
            y_t,
            n_shadow=4,
            n_calibration=80,
            random_state=3,
        )

    monkeypatch.setattr("recourse_privacy.processes.usable_cpus", lambda: 2)
    monkeypatch.setenv(pipeline.OVERLAP_ENV, "0")
    assert shadow.query_workers(4) == 1
    one = run()
    monkeypatch.setenv(pipeline.OVERLAP_ENV, "1")
    assert shadow.query_workers(4) == 2
    two = run()
    for name in shadow._FIELDS:
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name), err_msg=name)
    assert one.usable_targets.any() and len(planned) == (2 if method == "scfe" else 0)


def test_queries_in_threads_keep_order_and_raise_the_first_failure():
    calls = [lambda i=i: i * i for i in range(6)]
    assert list(shadow._in_threads(calls, 2)) == [i * i for i in range(6)]

    def fails():
        raise InvalidInputError("world 2 failed")

    with pytest.raises(InvalidInputError, match="world 2 failed"):
        list(shadow._in_threads([lambda: 0, lambda: 1, fails, lambda: 3], 2))
