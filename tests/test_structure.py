"""The structure a person can act on: one-hot groups, integer features, decoding to original units.

Preprocessor records it (groups, integer mask, affine map back), ``inverse_transform`` decodes,
``ActionSet.project`` maps proposals onto the valid set: checked against the math (a valid point
is its own projection, projection is idempotent, the nearest level is the l2-nearest).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recourse_privacy.data import Dataset, Preprocessor
from recourse_privacy.errors import IncompatibleError, InvalidInputError
from recourse_privacy.recourse import ActionSet


def _people(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """A 3-level categorical, a binary categorical, an int column marked categorical, integer and real numerics."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 70, n),
            "income": rng.normal(50.0, 10.0, n),
            "home": rng.choice(["rent", "own", "mortgage"], n),
            "sex": rng.choice(["F", "M"], n),
            "grade": rng.choice([1, 2, 3], n),
            "children": rng.integers(0, 4, n).astype(np.float64),  # integer-valued floats
        }
    )


def _dataset(X: pd.DataFrame, **kw) -> Dataset:
    return Dataset("people", X, np.zeros(len(X), dtype=np.int64), "y", categorical=("grade",), **kw)


@pytest.fixture(scope="module")
def fitted() -> tuple[pd.DataFrame, Preprocessor]:
    X = _people()
    return X, Preprocessor().fit(X, _dataset(X, immutable=("sex",), increasing=("age",)))


def test_structure_recorded(fitted) -> None:
    X, pre = fitted
    names = pre.feature_names_out_
    assert names[:3] == ["age", "income", "children"]
    assert [names[j] for j in np.flatnonzero(pre.integer_mask_)] == ["age", "children"]
    by_col = {g.column: g for g in pre.groups_}
    assert set(by_col) == {"home", "sex", "grade"}
    home, sex = by_col["home"], by_col["sex"]
    assert home.levels == ("mortgage", "own", "rent") and not home.allow_none
    assert [names[j] for j in home.index] == ["home=mortgage", "home=own", "home=rent"]
    # drop_first_binary keeps one indicator; all-off is the dropped level F
    assert sex.levels == ("M",) and sex.allow_none and sex.none_level == "F"
    Z = pre.transform(X)
    for g in pre.groups_:
        block = Z[:, g.index]
        assert np.all(np.isclose(block, g.on) | np.isclose(block, g.off))
    # the affine map to original units reproduces the raw numeric columns
    raw = Z * pre.unit_scale_ + pre.unit_offset_
    assert np.allclose(raw[:, 0], X["age"]) and np.allclose(raw[:, 1], X["income"])


def test_inverse_transform_round_trip(fitted) -> None:
    X, pre = fitted
    back = pre.inverse_transform(pre.transform(X))
    assert list(back.columns) == list(X.columns)
    assert back["grade"].dtype == X["grade"].dtype and back["age"].dtype == X["age"].dtype
    pd.testing.assert_frame_equal(back, X, check_dtype=False, check_exact=False, rtol=1e-9)
    assert back["grade"].tolist() == X["grade"].tolist()  # ints, not "1"


def test_inverse_transform_decodes_most_on_level(fitted) -> None:
    X, pre = fitted
    Z = pre.transform(X.head(2))
    home = next(g for g in pre.groups_ if g.column == "home")
    sex = next(g for g in pre.groups_ if g.column == "sex")
    # a fractional group: 0.3 of mortgage, 0.6 of rent -> rent; the binary at 0.4 -> the dropped level F
    Z[:, home.index] = home.off + np.array([0.3, 0.0, 0.6]) * (home.on - home.off)
    Z[:, sex.index] = sex.off + 0.4 * (sex.on - sex.off)
    back = pre.inverse_transform(Z)
    assert back["home"].tolist() == ["rent", "rent"] and back["sex"].tolist() == ["F", "F"]


def test_inverse_transform_refuses_what_it_cannot_decode() -> None:
    X = _people()
    X["age_copy"] = X["age"] * 2.0 + 1.0
    pre = Preprocessor().fit(X)
    with pytest.raises(IncompatibleError, match="age_copy"):
        pre.inverse_transform(pre.transform(X))
    X["const"] = 3.0  # a constant is dropped but known
    pre = Preprocessor().fit(X.drop(columns="age_copy"))
    assert (pre.inverse_transform(pre.transform(X.head(3)))["const"] == 3.0).all()
    norm = Preprocessor(normalize_rows=True).fit(X)
    with pytest.raises(IncompatibleError, match="normalize_rows"):
        norm.inverse_transform(norm.transform(X))
    with pytest.raises(InvalidInputError, match="shape"):
        pre.inverse_transform(np.zeros((2, 3)))


def test_correlation_filter_drops_a_level_and_all_off_becomes_valid() -> None:
    X = _people()
    pre = Preprocessor(drop_first_binary=False).fit(X)  # sex=F and sex=M: r = -1, one goes
    sex = next(g for g in pre.groups_ if g.column == "sex")
    assert sex.size == 1 and sex.allow_none and sex.none_level == "M"
    back = pre.inverse_transform(pre.transform(X))
    assert back["sex"].tolist() == X["sex"].tolist()


def test_from_preprocessor_structure_only(fitted) -> None:
    _, pre = fitted
    full = ActionSet.from_preprocessor(pre)
    bare = ActionSet.from_preprocessor(pre, actionable=False)
    assert full.immutable.any() and not bare.immutable.any() and not bare.increasing.any()
    assert np.isinf(bare.lower).all() and np.isinf(bare.upper).all()
    assert len(bare.groups) == 3 and bare.integer.sum() == 2 and bare.structured
    assert not ActionSet.unconstrained(4).structured


def test_project_makes_rows_valid_and_keeps_immutable_levels(fitted) -> None:
    X, pre = fitted
    Z = pre.transform(X)
    rng = np.random.default_rng(1)
    for aset in (ActionSet.from_preprocessor(pre), ActionSet.from_preprocessor(pre, actionable=False)):
        proposal = Z + rng.normal(0, 1.0, Z.shape)
        P = aset.project(proposal, Z)
        assert (aset.violations(P, Z) == 0).all()
        assert (aset.structural_violations(proposal) > 0).all()
        back = pre.inverse_transform(P)
        assert back["home"].isin(["rent", "own", "mortgage"]).all()
        assert np.allclose(back["children"], np.round(back["children"]))
        assert np.array_equal(aset.project(P, Z), P)  # idempotent, exactly
    full = ActionSet.from_preprocessor(pre)
    P = full.project(Z + rng.normal(0, 1.0, Z.shape), Z)
    back = pre.inverse_transform(P)
    assert back["sex"].tolist() == X["sex"].tolist()  # immutable categorical keeps its level
    assert (back["age"] >= X["age"]).all()  # increasing integer, rounded upward where needed


def test_project_broadcasts_leading_axes(fitted) -> None:
    X, pre = fitted
    Z = pre.transform(X.head(5))
    aset = ActionSet.from_preprocessor(pre)
    cand = Z[:, None, :] + np.random.default_rng(2).normal(0, 1, (5, 4, Z.shape[1]))
    P = aset.project(cand, Z[:, None, :])
    assert P.shape == cand.shape
    assert np.array_equal(P[2], aset.project(cand[2], np.repeat(Z[2:3], 4, axis=0)))


def test_unstructured_project_unchanged() -> None:
    rng = np.random.default_rng(3)
    imm, inc = np.array([True, False, False]), np.array([False, True, False])
    aset = ActionSet(imm, inc, np.full(3, -1.0), np.full(3, 1.0))
    X, C = rng.normal(size=(20, 3)), rng.normal(0, 2, size=(20, 3))
    expected = np.clip(
        np.where(inc, np.maximum(np.where(imm, X, C), X), np.where(imm, X, C)), np.minimum(-1, X), np.maximum(1, X)
    )
    assert np.array_equal(aset.project(C, X), expected)


def _group_set(on, off, allow_none: bool, integer_scale: float) -> ActionSet:
    from recourse_privacy.data import OneHotGroup

    k = len(on)
    d = k + 1
    g = OneHotGroup("c", np.arange(k), tuple(f"l{i}" for i in range(k)), np.asarray(on), np.asarray(off), allow_none)
    z = np.zeros(d, bool)
    integer = np.r_[np.zeros(k, bool), True]
    scale = np.r_[np.ones(k), integer_scale]
    return ActionSet(
        z, z.copy(), np.full(d, -np.inf), np.full(d, np.inf), (g,), integer, scale, np.r_[np.zeros(k), 0.5]
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    k=st.integers(1, 4),
    allow_none=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    integer_scale=st.floats(0.05, 20.0),
)
def test_projection_properties(k: int, allow_none: bool, seed: int, integer_scale: float) -> None:
    rng = np.random.default_rng(seed)
    off = rng.uniform(-2, 0, k)
    on = off + rng.uniform(0.2, 3, k)
    if k == 1:
        allow_none = True  # a one-indicator group always has a dropped level
    aset = _group_set(on, off, allow_none, integer_scale)
    V = rng.normal(0, 2, (50, k + 1))
    P = aset.project(V, V)
    assert (aset.structural_violations(P) == 0).all()
    assert np.array_equal(aset.project(P, P), P)  # idempotent; a valid point is its own projection
    blocks = V.reshape(5, 10, k + 1)  # a block of (rows, samples, d) as a search projects it: the same points
    assert np.array_equal(aset.project(blocks, blocks), P.reshape(5, 10, k + 1))
    # the chosen level is the l2-nearest valid level
    levels = [np.where(np.arange(k) == j, on, off) for j in range(k)] + ([off] if allow_none else [])
    dist = np.stack([((V[:, :k] - lv) ** 2).sum(axis=1) for lv in levels], axis=1)
    chosen = ((V[:, :k] - P[:, :k]) ** 2).sum(axis=1)
    assert np.allclose(chosen, dist.min(axis=1))
    # the integer feature is the nearest integer in original units
    orig = V[:, k] * integer_scale + 0.5
    assert np.allclose(P[:, k] * integer_scale + 0.5, np.round(orig))
