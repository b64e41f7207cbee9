"""Figure 2 at d = 7,000 under 2 GB (issue 28, item 5): the pools transformed in row chunks give the same
numbers, and the float32 synthetic frame is the float64 draws rounded, exact enough for the audit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from recourse_privacy import run_audit
from recourse_privacy.audit.stages import transform_rows
from recourse_privacy.data import Preprocessor
from recourse_privacy.data.datasets import SYNTHETIC_FLOAT32_BYTES
from recourse_privacy.data.synthetic import make_synthetic
from recourse_privacy.errors import InvalidInputError


def test_transform_in_row_chunks_equals_one_transform():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(1100, 6)) * [1, 10, 100, 1, 1, 1], columns=[f"c{j}" for j in range(6)])
    frame["c5"] = frame["c0"] * 2 + 1e-3 * rng.normal(size=1100)  # dropped by the correlation filter
    frame["cat"] = rng.choice(["a", "b", "c"], size=1100)
    rows = rng.permutation(1100)[:1037]
    for normalize in (False, True):
        pre = Preprocessor(normalize_rows=normalize).fit(frame.iloc[rows[:400]])
        whole = pre.transform(frame.iloc[rows])
        for chunk in (100, 512, 1036):
            np.testing.assert_array_equal(transform_rows(pre, frame, rows, chunk=chunk), whole)


def test_float32_synthetic_frame_is_the_float64_draws_rounded():
    a = make_synthetic(2100, 30, random_state=3, flip_y=0.1)
    b = make_synthetic(2100, 30, random_state=3, flip_y=0.1, dtype="float32")
    x64, x32 = a.X.to_numpy(), b.X.to_numpy()
    assert x32.dtype == np.float32 and x64.dtype == np.float64
    np.testing.assert_array_equal(x32, x64.astype(np.float32))  # round to nearest: the same draws
    assert np.abs(x32.astype(np.float64) - x64).max() <= 2.0**-24 * np.abs(x64).max()
    np.testing.assert_array_equal(a.y, b.y)
    assert 20_000 * 7_000 * 8 > SYNTHETIC_FLOAT32_BYTES > 15_000 * 1_000 * 8  # Figure 2's d = 5,000 and 7,000 only


def _pairs_within(scores, y, eps):
    """Member / non-member pairs whose scores lie within eps: the only pairs a perturbation of eps can swap."""
    s1, s0 = scores[y == 1], scores[y == 0]
    return int((np.abs(s1[:, None] - s0[None, :]) <= eps).sum())


def _assert_same_to_rounding(a, b, attacks) -> None:
    """Same targets; distances within lbfgs's tol; each AUC moved by at most the pairs within rounding's reach."""
    y = a.arrays.is_member
    np.testing.assert_array_equal(y, b.arrays.is_member)
    np.testing.assert_allclose(b.arrays.cfd, a.arrays.cfd, rtol=1e-4)  # lbfgs stops at tol 1e-4
    n1, n0 = int(y.sum()), int((y == 0).sum())
    for name in attacks:
        s = a.arrays.scores[name].scores
        eps = 1e-4 * np.abs(s).max()
        assert abs(a.attacks[name].auc - b.attacks[name].auc) <= _pairs_within(s, y, eps) / (n1 * n0), name


def test_float32_synthetic_frame_leaves_the_audit_unchanged_to_its_rounding():
    # inputs within 2^-24 relative: the owner's model, the targets and the distances move by rounding only, and an
    # attack's AUC can change only through the member / non-member pairs whose scores lie that close
    kw = dict(n_features=400, n_members=300, shadow_models=4, attacks=("cfd", "cfd-lrt", "loss-lrt"), cache="off")
    a = run_audit(**kw, data_params={"dtype": "float64"})
    b = run_audit(**kw, data_params={"dtype": "float32"})
    _assert_same_to_rounding(a, b, kw["attacks"])


def test_recourse_in_row_chunks_equals_one_call(monkeypatch):
    import recourse_privacy.attacks.shadow as shadow
    from recourse_privacy.models.registry import model_factory
    from recourse_privacy.recourse.registry import make_recourse

    rng = np.random.default_rng(1)
    X = rng.normal(size=(700, 12))
    y = (X[:, 0] + 0.5 * rng.normal(size=700) > 0).astype(int)
    model = model_factory("logistic")(0).fit(X[:400], y[:400])
    method = make_recourse("linear")
    whole = method.generate(model, X)
    monkeypatch.setattr(shadow, "CHUNK_BYTES", 8 * 12 * 64)  # 64 rows a chunk
    parts = shadow.generate_in_row_chunks(lambda Z: method.generate(model, Z), X)
    for field in ("factuals", "counterfactuals", "valid"):
        np.testing.assert_array_equal(getattr(parts, field), getattr(whole, field))
    cfd, valid = shadow._distance_and_validity(method, model, X, "l1")
    np.testing.assert_array_equal(cfd, whole.distance("l1"))
    np.testing.assert_array_equal(valid, whole.valid)
    rows = np.flatnonzero(rng.random(700) < 0.4)  # a subset, gathered a chunk at a time: as the gathered subset
    cfd, valid = shadow._distance_and_validity(method, model, X, "l1", rows)
    cfd_gathered, valid_gathered = shadow._distance_and_validity(method, model, X[rows], "l1")
    np.testing.assert_array_equal(cfd, cfd_gathered)
    np.testing.assert_array_equal(valid, valid_gathered)
    np.testing.assert_allclose(cfd, whole.distance("l1")[rows], rtol=1e-14)  # other batch shapes: BLAS rounding

    # a method that moves some factuals (a projection onto the valid set): the chunks' own factuals are kept
    def moved(Z):
        res = method.generate(model, Z)
        return replace(res, factuals=res.factuals + (Z[:, :1] > 1.5))

    parts = shadow.generate_in_row_chunks(moved, X)
    np.testing.assert_array_equal(parts.factuals, X + (X[:, :1] > 1.5))
    np.testing.assert_array_equal(parts.counterfactuals, whole.counterfactuals)


def _reference_fit(frame: pd.DataFrame, scaling: str) -> np.ndarray:
    """scikit-learn's own fit_transform of the Preprocessor's unfitted pipeline: what ``fit`` scaled before
    it fitted the steps one after the other."""
    pre = Preprocessor(scaling=scaling, corr_threshold=None)
    X, _, _ = pre._fit_columns(frame, None)
    return np.asarray(pre._new_pipeline().fit_transform(pre._prepare(X)), dtype=np.float64)


def test_preprocessor_fitted_step_by_step_scales_as_the_pipeline_does():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(rng.normal(size=(300, 5)) * [1, 10, 1e3, 1, 1e-3], columns=[f"c{j}" for j in range(5)])
    frame["c4"] = frame["c4"].astype(np.float32)
    frame["cat"] = rng.choice(["a", "b", "c"], size=300)
    frame["two"] = rng.choice(["u", "v"], size=300)
    for scaling in ("standard", "minmax", "none"):
        ref = _reference_fit(frame, scaling)
        pre = Preprocessor(scaling=scaling, corr_threshold=None).fit(frame)
        np.testing.assert_array_equal(pre.transform(frame), ref)  # transform: the fitted pipeline
        np.testing.assert_array_equal(pre.lower_, ref.min(axis=0))
        np.testing.assert_array_equal(pre.upper_, ref.max(axis=0))


def test_preprocessor_names_the_infinite_column():
    frame = pd.DataFrame({"a": [0.0, 1.0, 2.0], "b": [1.0, 2.0, 3.0]})
    pre = Preprocessor(corr_threshold=None).fit(frame)
    bad = frame.assign(b=[1.0, np.inf, 3.0])
    with pytest.raises(InvalidInputError, match="'b' has infinite values"):
        pre.transform(bad)


def test_float32_pools_are_the_float64_encoding_rounded(monkeypatch):
    import recourse_privacy.audit.stages as stages
    from recourse_privacy.audit.config import AuditConfig

    data = make_synthetic(400, 30, random_state=5, dtype="float32")
    config = AuditConfig(dataset="synthetic", n_features=30, n_members=100, n_nonmembers=100, n_adversary=200)
    small = stages.prepare_game(config, data)
    assert small.X_pool.dtype == np.float64  # a small frame: float64 pools, as before
    monkeypatch.setattr(stages, "LARGE_FRAME_BYTES", 1000)
    large = stages.prepare_game(config, data)
    assert stages.stores_float32(data) and large.X_pool.dtype == np.float32
    for name in ("X_members", "X_nonmembers", "X_pool"):
        np.testing.assert_array_equal(getattr(large, name), getattr(small, name).astype(np.float32))
    from recourse_privacy.models.registry import model_factory

    targets = stages.select_targets(stages.train_owner(model_factory("logistic"), small, 0).model, large)
    assert targets.X.dtype == np.float64  # the targets widened once, exactly
    float64_frame = make_synthetic(400, 30, random_state=5, dtype="float64")
    assert not stages.stores_float32(float64_frame)  # a float64 frame keeps float64 pools, however large


def test_a_large_frame_no_stage_reads_is_released_and_the_audit_is_unchanged(monkeypatch):
    import recourse_privacy.audit.stages as stages
    from recourse_privacy.audit.config import AuditConfig

    kw = dict(n_features=40, n_members=300, shadow_models=2, attacks=("cfd", "cfd-lrt", "loss"), cache="off")
    kw["data_params"] = {"dtype": "float64"}  # float64 pools: only the release differs
    before = run_audit(**kw)
    seen = []
    real = stages.release_frame

    def spy(config, game):
        out = real(config, game)
        seen.append(out.dataset)
        return out

    monkeypatch.setattr(stages, "LARGE_FRAME_BYTES", 1000)
    monkeypatch.setattr(stages, "release_frame", spy)
    after = run_audit(**kw)
    (kept,) = seen
    assert kept.X.shape == (before.data.n_rows, 0) and kept.n_rows == before.data.n_rows
    assert after.data.n_rows == before.data.n_rows
    for name in kw["attacks"]:
        np.testing.assert_array_equal(after.arrays.scores[name].scores, before.arrays.scores[name].scores)
        assert after.attacks[name].auc == before.attacks[name].auc
    # a stage that reads the raw frame keeps it
    assert stages.reads_raw_frame(AuditConfig(groups=("x0",)))
    assert stages.reads_raw_frame(AuditConfig(threats=("membership", "extraction")))
    assert not stages.reads_raw_frame(AuditConfig())


def test_float32_pools_leave_the_audit_unchanged_to_their_rounding(monkeypatch):
    # a float32 frame above LARGE_FRAME_BYTES: float32 pools (each value the float64 encoding rounded) and the
    # frame released; against the float64 audit, the attacks' AUCs move only through the member / non-member
    # pairs whose scores lie within the rounding's reach (as for the float32 frame above)
    import recourse_privacy.audit.stages as stages

    kw = dict(n_features=400, n_members=300, shadow_models=2, attacks=("cfd", "cfd-lrt", "loss-lrt"), cache="off")
    a = run_audit(**kw, data_params={"dtype": "float64"})
    monkeypatch.setattr(stages, "LARGE_FRAME_BYTES", 1000)
    b = run_audit(**kw, data_params={"dtype": "float32"})
    _assert_same_to_rounding(a, b, kw["attacks"])


def test_check_matrix_keeps_a_float64_input_and_still_names_the_bad_columns():
    from recourse_privacy.validation import check_matrix

    X = np.arange(12.0).reshape(3, 4)
    assert check_matrix(X) is X  # no copy, one finiteness mask only
    X32 = X.astype(np.float32)
    np.testing.assert_array_equal(check_matrix(X32), X)  # float32 widened exactly
    X[1, 2], X[2, 0] = np.nan, np.inf
    with pytest.raises(InvalidInputError, match=r"2 NaN or infinite values \(feature columns \[0, 2\]\)"):
        check_matrix(X)


def test_shadow_models_on_float32_pools_read_the_rows_widened(monkeypatch):
    # float32 pools (stores_float32): each shadow model's rows gathered as float64 a chunk at a time, and
    # freed once read; every statistic equals the one on the float64 pool holding the same values
    import recourse_privacy.attacks.shadow as shadow
    from recourse_privacy.models.registry import model_factory
    from recourse_privacy.recourse.registry import make_recourse

    rng = np.random.default_rng(2)
    X32 = rng.normal(size=(400, 9)).astype(np.float32)
    y = (X32[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)
    Xt, yt = rng.normal(size=(60, 9)) - 1.0, np.zeros(60, int)
    idx = np.flatnonzero(rng.random(400) < 0.5)
    monkeypatch.setattr(shadow, "CHUNK_BYTES", 8 * 9 * 16)  # 16 rows a chunk
    gathered = shadow._rows_float64(X32, idx)
    assert gathered.dtype == np.float64
    np.testing.assert_array_equal(gathered, X32[idx].astype(np.float64))
    kw = dict(n_shadow=3, n_calibration=50, random_state=0)
    runs = [
        shadow.run_shadow_models(model_factory("logistic"), make_recourse("linear"), X, y, Xt, yt, **kw)
        for X in (X32, X32.astype(np.float64))
    ]
    for name in ("cfd_targets", "conf_targets", "margin_targets", "cfd_calib", "train_accuracy"):
        np.testing.assert_array_equal(getattr(runs[0], name), getattr(runs[1], name), err_msg=name)


def test_distances_in_row_chunks_equal_one_pass(monkeypatch):
    import recourse_privacy.recourse.base as base

    rng = np.random.default_rng(6)
    X = rng.normal(size=(301, 17))
    X_cf = X + rng.normal(size=X.shape) * (rng.random(X.shape) < 0.3)  # some features unchanged (l0)
    whole = {norm: base.distances(X, X_cf, norm) for norm in base.NORMS}
    monkeypatch.setattr(base, "_DISTANCE_CHUNK", 17 * 10)  # 10 rows a chunk, the last one short
    for norm in base.NORMS:
        np.testing.assert_array_equal(base.distances(X, X_cf, norm), whole[norm], err_msg=norm)
    with pytest.raises(InvalidInputError, match="unknown norm 'l3'"):
        base.distances(X, X_cf, "l3")
