"""Missing values in a user's data: kept as NaN for the user's model, held in every counterfactual.

A lender's gradient-boosted trees read NaN natively (HistGradientBoosting, XGBoost, LightGBM), and a lender's pipeline
imputes inside itself: the audit must take the rows as they are. In the audit's encoded space a numeric column that may
be missing has its value (the fit rows' most frequent one in the gaps) and an indicator (:class:`MissingFlag`); the
indicator decodes back to NaN, and the action set keeps both as the factual has them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

from recourse_privacy import run_audit
from recourse_privacy.data.preprocessing import Preprocessor
from recourse_privacy.data.tabular import validate_frame
from recourse_privacy.recourse.constraints import ActionSet


def _gappy(n: int = 600, seed: int = 0, region_gaps: bool = False) -> pd.DataFrame:
    """Three numeric columns and a categorical one; ``debt`` missing in a third of the rows, ``age`` in a tenth, and
    ``months`` missing exactly where ``debt`` is for half of those (two indicators that agree on most rows)."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "income": rng.normal(50, 10, n).round(1),
            "debt": rng.integers(0, 40, n).astype(float),
            "age": rng.integers(20, 70, n).astype(float),
            "months": rng.integers(0, 120, n).astype(float),
            "region": rng.choice(["north", "south", "east"], n),
        }
    )
    score = (df.income - 50) / 10 - (df.debt - 20) / 12 + rng.normal(0, 0.8, n)
    debt_gap = rng.random(n) < 0.33
    df.loc[debt_gap, "debt"] = np.nan
    df.loc[debt_gap & (rng.random(n) < 0.5), "months"] = np.nan
    df.loc[rng.random(n) < 0.1, "age"] = np.nan
    if region_gaps:
        df.loc[rng.random(n) < 0.15, "region"] = np.nan
    df["label"] = (score > 0).astype(int)
    return df


def test_gaps_decode_back_to_nan_and_every_flag_survives_the_filter() -> None:
    df = _gappy()
    X = df.drop(columns="label")
    ds = validate_frame(df, "label")
    fit_rows = X.iloc[:200].copy()
    fit_rows["age"] = fit_rows["age"].fillna(30.0)  # no gap in the fit rows, gaps elsewhere in the data
    pre = Preprocessor(corr_threshold=0.5).fit(fit_rows, ds)
    assert [f.column for f in pre.missing_flags_] == ["debt", "age", "months"]
    # a flag stays though it is constant in the fit rows (age) or agrees with another (debt and months)
    assert {f"missingindicator_{c}" for c in ("debt", "age", "months")} <= set(pre.feature_names_out_)
    Z = pre.transform(X)
    back = pre.inverse_transform(Z)
    pd.testing.assert_frame_equal(back[["income", "debt", "age", "months"]], X[["income", "debt", "age", "months"]])
    for f in pre.missing_flags_:  # the gaps hold an observed value of the fit rows, inside the column's range
        gaps = X[f.column].isna().to_numpy()
        assert f.is_on(Z).tolist() == gaps.tolist()
        raw = Z[gaps, f.value] * pre.unit_scale_[f.value] + pre.unit_offset_[f.value]
        assert np.isin(np.round(raw, 9), fit_rows[f.column].dropna().to_numpy()).all()


def test_the_action_set_holds_a_missing_value_and_only_it() -> None:
    df = _gappy()
    X = df.drop(columns="label")
    pre = Preprocessor().fit(X, validate_frame(df, "label"))
    Z = pre.transform(X)
    rng = np.random.default_rng(1)
    proposals = Z[:, None, :] + rng.normal(0, 2, size=(len(Z), 4, Z.shape[1]))
    for actionable in (False, True):
        acts = ActionSet.from_preprocessor(pre, actionable=actionable)
        P = acts.project(proposals, Z[:, None, :])
        np.testing.assert_array_equal(acts.project(P, Z[:, None, :]), P)  # projecting twice: once
        for f in pre.missing_flags_:
            np.testing.assert_array_equal(P[..., f.flag], np.broadcast_to(Z[:, None, f.flag], P.shape[:2]))
            gap = f.is_on(Z)
            np.testing.assert_array_equal(P[gap, :, f.value], np.broadcast_to(Z[gap, None, f.value], (gap.sum(), 4)))
            assert (P[~gap, :, f.value] != Z[~gap, None, f.value]).any()  # an observed value still moves
        flat = P.reshape(-1, Z.shape[1])
        assert (acts.violations(flat, np.repeat(Z, 4, axis=0)) == 0).all()
    acts = ActionSet.from_preprocessor(pre, actionable=False)  # structure only: no range a step could leave
    debt = next(f for f in pre.missing_flags_ if f.column == "debt")
    filled = Z.copy()
    filled[:, debt.value] += 1.0 / pre.unit_scale_[debt.value]  # one more unit of debt, a missing one given a value
    assert (acts.violations(filled, Z) > 0).tolist() == debt.is_on(Z).tolist()
    # a row missing every column that may change is stuck, the others are not
    acts = ActionSet.from_preprocessor(pre, actionable=True)
    mutable_numeric = {"debt", "months"}
    frozen = ActionSet(
        acts.immutable | ~np.isin(pre.feature_sources_, list(mutable_numeric)),
        acts.increasing,
        acts.lower,
        acts.upper,
        flags=acts.flags,
    )
    both = (X.debt.isna() & X.months.isna()).to_numpy()
    assert frozen.stuck(Z).tolist() == both.tolist() and both.any()


def test_a_row_missing_its_only_changeable_category_is_stuck() -> None:
    df = _gappy(region_gaps=True)
    X = df.drop(columns="label")
    pre = Preprocessor().fit(X, validate_frame(df, "label"))
    acts = ActionSet.from_preprocessor(pre, actionable=True)
    frozen = ActionSet(
        acts.immutable | ~np.isin(pre.feature_sources_, ["region"]), acts.increasing, acts.lower, acts.upper,
        groups=acts.groups, flags=acts.flags,
    )  # fmt: skip
    assert frozen.holds_gaps and not ActionSet.unconstrained(3).holds_gaps
    assert frozen.stuck(pre.transform(X)).tolist() == X.region.isna().tolist()


def _deployed_audit(model, data: pd.DataFrame, members: np.ndarray, attacks: tuple[str, ...]):
    """A small as-deployed audit of ``model`` on ``data`` (label column ``label``), Growing Spheres, 2 references."""
    return run_audit(
        model=model, data=data, members=members, target="label", recourse="gs", shadow_models=2, n_members=120,
        attacks=attacks, cache="off",
    )  # fmt: skip


@pytest.fixture(scope="module")
def deployed_trees():
    df = _gappy(800)
    mask = np.random.default_rng(2).random(len(df)) < 0.5
    X = df.drop(columns="label").assign(region=lambda d: d.region.map({"north": 0, "south": 1, "east": 2}))
    model = HistGradientBoostingClassifier(max_iter=40, random_state=0).fit(X[mask], df.label[mask])
    return X.assign(label=df.label), mask, model


def test_a_deployed_model_that_reads_nan_is_audited_on_its_raw_rows(deployed_trees):
    data, mask, model = deployed_trees
    r = _deployed_audit(model, data, mask, ("cfd", "cfd-lrt", "loss"))
    ex = r.arrays.exposure
    raw = data.drop(columns="label").iloc[ex["row"].to_numpy()]
    # the model's own probabilities, NaN and all: the gaps reached it as NaN, not as the encoded fill value
    np.testing.assert_allclose(ex["p_favourable"].to_numpy(), model.predict_proba(raw)[:, 1], rtol=0, atol=1e-12)
    cf = r.arrays.counterfactuals
    for col in ("debt", "age", "months"):
        assert cf[col].isna().any()
        assert (cf[col].isna() == cf[f"{col}_cf"].isna()).all(), col  # a missing value stays missing
    decoded = cf[[f"{c}_cf" for c in raw.columns]].set_axis(list(raw.columns), axis=1)
    assert (model.predict(decoded) == 1).tolist() == cf["valid"].tolist()  # valid: the model accepts the row as shown
    assert any("missing values" in w and "stays missing" in w for w in r.warnings)


def test_a_rejected_row_missing_every_changeable_value_is_not_searched(monkeypatch):
    df = _gappy(500, seed=3)
    import recourse_privacy.recourse.base as base

    searched: list[int] = []
    original = base._search_in_chunks

    def counting(method, model, X, state):
        searched.append(len(X))
        return original(method, model, X, state)

    monkeypatch.setattr(base, "_search_in_chunks", counting)
    r = run_audit(
        data=df,
        target="label",
        model="logistic",
        recourse="gs",
        immutable=("income", "age", "region"),
        n_members=100,
        shadow_models=2,
        attacks=("cfd",),
        groups=("months",),
        cache="off",
    )
    gap_groups = [g for g in r.groups if g.value == "(missing)"]
    assert gap_groups and gap_groups[0].n_members + gap_groups[0].n_nonmembers == int(
        r.arrays.counterfactuals["months"].isna().sum()
    )  # the targets missing months are a group of their own, named so
    cf = r.arrays.counterfactuals
    stuck = (cf["debt"].isna() & cf["months"].isna()).to_numpy()
    assert stuck.any() and not cf["valid"][stuck].any()
    assert (cf.loc[stuck, "n_changed"] == 0).all()
    assert r.arrays.recourse.n_iter[stuck].tolist() == [-1] * int(stuck.sum())
    assert searched[0] == int((~stuck).sum())  # the owner's search never saw them
    assert any(f"({int(stuck.sum())} miss every column that may change)" in w for w in r.warnings)


def test_public_bounds_give_an_indicator_its_two_images_not_its_columns_range() -> None:
    from recourse_privacy.data.domain import encoded_bounds

    df = _gappy()
    pre = Preprocessor().fit(df.drop(columns="label"), validate_frame(df, "label"))
    bounds = {"income": (0.0, 100.0), "debt": (0.0, 40.0), "age": (18.0, 90.0), "months": (0.0, 120.0)}
    lower, upper, lacking = encoded_bounds(pre, bounds)
    assert lacking == []
    for f in pre.missing_flags_:
        assert (lower[f.flag], upper[f.flag]) == (min(f.on, f.off), max(f.on, f.off))
        assert lower[f.value] < upper[f.value]
    Z = pre.transform(df.drop(columns="label"))
    assert ((Z >= lower - 1e-12) & (Z <= upper + 1e-12)).all()  # every row, gaps included, inside its public box


def test_attribute_inference_on_a_column_with_gaps_is_refused_by_name() -> None:
    from recourse_privacy.errors import InvalidInputError

    df = _gappy(3000)
    with pytest.raises(InvalidInputError, match="--sensitive age: the column is missing in \\d+ rows"):
        run_audit(
            data=df,
            target="label",
            model="logistic",
            recourse="gs",
            threats=("attribute",),
            sensitive="age",
            n_members=200,
            n_adversary=1200,
            shadow_models=2,
            cache="off",
        )


def test_publishing_from_data_with_gaps_marks_those_columns_and_refuses_an_empty_one() -> None:
    """The service takes gaps (tests/test_service_gaps.py); a column of nothing but gaps is refused by name."""
    from dataclasses import replace

    from recourse_privacy.errors import InvalidInputError
    from recourse_privacy.service.schema import schema_from_dataset

    ds = validate_frame(_gappy(), "label")
    schema = schema_from_dataset(ds)
    gaps = ds.X.columns[ds.X.isna().any()].tolist()
    assert gaps and [f.name for f in schema.features if f.missing] == gaps
    with pytest.raises(InvalidInputError, match="column 'debt' has no value at all"):
        schema_from_dataset(replace(ds, X=ds.X.assign(debt=np.nan)))


def test_an_integer_column_stored_as_float_decodes_to_its_integers_for_a_tree_split_at_one() -> None:
    from lightgbm import LGBMClassifier

    df = _gappy(1500, seed=4)  # debt, age and months: integers stored as float (they have gaps)
    X = df.drop(columns="label").drop(columns="region")
    model = LGBMClassifier(n_estimators=60, min_child_samples=5, verbose=-1, random_state=0).fit(X, df.label)
    pre = Preprocessor(corr_threshold=None).fit(X.iloc[:700], validate_frame(df.drop(columns="region"), "label"))
    back = pre.inverse_transform(pre.transform(X))
    for col in ("debt", "age", "months"):  # exact, not within an ulp
        np.testing.assert_array_equal(back[col].dropna(), X[col].dropna())
    np.testing.assert_array_equal(model.predict_proba(back), model.predict_proba(X))
    # a value that is no integer (a search's candidate, a probe's point) is left as it is
    Z = pre.transform(X.iloc[:5])
    debt = pre.feature_names_out_.index("debt")
    Z[:, debt] += 0.37 / pre.unit_scale_[debt]
    assert not np.allclose(pre.inverse_transform(Z)["debt"].dropna() % 1, 0)


def test_a_categorical_gap_is_a_level_no_one_moves_to_or_from() -> None:
    df = _gappy(region_gaps=True)
    X = df.drop(columns="label")
    ds = validate_frame(df, "label")
    assert ds.X["region"].isna().sum() == X["region"].isna().sum() > 0  # gaps, not the text "nan"
    pre = Preprocessor().fit(X, ds)
    group = next(g for g in pre.groups_ if g.column == "region")
    Z = pre.transform(X)
    gap = X["region"].isna().to_numpy()
    assert group.at_missing(Z).tolist() == gap.tolist()
    assert pre.inverse_transform(Z)["region"].isna().tolist() == gap.tolist()
    rng = np.random.default_rng(5)
    proposals = Z[:, None, :] + rng.normal(0, 3, size=(len(Z), 6, Z.shape[1]))
    for actionable in (False, True):
        acts = ActionSet.from_preprocessor(pre, actionable=actionable)
        P = acts.project(proposals, Z[:, None, :])
        np.testing.assert_array_equal(acts.project(P, Z[:, None, :]), P)
        at = group.at_missing(P)
        assert at[gap].all() and not at[~gap].any()  # a gap stays, and no level becomes one
        np.testing.assert_array_equal(
            P[gap][:, :, group.index], np.broadcast_to(Z[gap, None][:, :, group.index], at[gap].shape + (group.size,))
        )
        moved = pre.inverse_transform(P[~gap].reshape(-1, Z.shape[1]))["region"]
        assert set(moved) == {"north", "south", "east"}  # the others still switch between real levels
        assert (acts.violations(P.reshape(-1, Z.shape[1]), np.repeat(Z, 6, axis=0)) == 0).all()
    filled = Z.copy()
    filled[gap] = Z[np.flatnonzero(~gap)[0]]  # a gap given a level (and every other column of that row)
    assert (acts.violations(filled[gap], Z[gap]) > 0).all()


def test_a_deployed_pipeline_whose_encoder_knows_the_gap_gets_it_as_nan() -> None:
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    df = _gappy(800, seed=6, region_gaps=True)
    mask = np.random.default_rng(7).random(len(df)) < 0.5
    X = df.drop(columns="label")
    prep = ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), ["region"])], remainder="passthrough")
    model = Pipeline([("prep", prep), ("clf", HistGradientBoostingClassifier(max_iter=40, random_state=0))])
    model.fit(X[mask], df.label[mask])
    assert any(pd.isna(c) for c in model.named_steps["prep"].named_transformers_["oh"].categories_[0])
    r = _deployed_audit(model, df, mask, ("cfd", "loss"))
    ex = r.arrays.exposure
    raw = X.iloc[ex["row"].to_numpy()]
    np.testing.assert_allclose(ex["p_favourable"].to_numpy(), model.predict_proba(raw)[:, 1], rtol=0, atol=1e-12)
    cf = r.arrays.counterfactuals
    assert cf["region"].isna().any()
    assert (cf["region"].isna() == cf["region_cf"].isna()).all()
    assert not cf.loc[cf["region"].isna(), "changed"].fillna("").str.contains("region").any()
    assert any("in 4 columns" in w and "region" in w for w in r.warnings)  # the note names the categorical one


def test_how_each_column_is_written_is_found_as_one_scan_would() -> None:
    from recourse_privacy.data.preprocessing import MAX_EXCEPTIONS, _writings

    rng = np.random.default_rng(8)
    M = rng.normal(size=(600, 1100))  # more columns than one block
    M[:, :300] = np.round(M[:, :300] * 100)
    M[:, 300:600] = np.round(M[:, 300:600], rng.integers(1, 7))
    M[:64, 700] = np.round(M[:64, 700])  # the first 64 rows say 0 decimals, the column says 3 but for one value
    M[65:, 700] = np.round(M[65:, 700], 3)
    M[::7, 10] = 70.2104219767771  # integers, and the mean that imputed them
    M[::3, 20] = rng.normal(size=200)  # two thirds integers, 200 values off the grid: the 64 most frequent kept
    M[::6, 20] = M[0, 20]
    M[rng.random(M.shape) < 0.05] = np.nan
    frame = pd.DataFrame(M, columns=[f"c{j}" for j in range(M.shape[1])])

    def one_scan(v: np.ndarray) -> tuple[int | None, bool, list[float]]:
        v = v[~np.isnan(v)]
        on = [np.round(v, k) == v for k in range(7)]
        fractions = [m.mean() for m in on]
        if max(fractions) < 0.5:
            return None, False, []
        k = next(k for k in range(7) if fractions[k] == max(fractions))
        levels, counts = np.unique(v[~on[k]], return_counts=True)
        top = sorted(levels[np.argsort(-counts, kind="stable")[:MAX_EXCEPTIONS]].tolist())
        return k, bool(on[k].all()), top

    found = _writings(frame, list(frame.columns))
    assert [(w.decimals, w.exact, w.exceptions.tolist()) for w in found] == [one_scan(M[:, j]) for j in range(1100)]
    assert found[10].decimals == 0 and found[10].exceptions.tolist() == [70.2104219767771]
    assert found[700].decimals == 3 and len(found[700].exceptions) == 1
    assert found[20].decimals == 0 and len(found[20].exceptions) == MAX_EXCEPTIONS
    assert M[0, 20] in found[20].exceptions  # the most frequent one


def test_decoding_gives_every_data_value_back_in_a_column_of_integers_with_an_imputed_mean() -> None:
    """CARLA's HELOC: integer columns stored as float, a mean imputed in some rows (70.2104219767771). Standard
    scaling of a column with a large mean and back leaves 54.99999999999979 for 55, and a tree that splits at a
    data value (HistGradientBoosting's quantiles) reads it on the wrong side."""
    rng = np.random.default_rng(9)
    n = 3000
    X = pd.DataFrame(
        {
            "score": rng.integers(30, 95, n).astype(float) + 1000.0,
            "burden": rng.integers(0, 120, n).astype(float),
            "ratio": np.round(rng.uniform(0, 1, n), 2),
        }
    )
    X.loc[rng.random(n) < 0.2, "burden"] = 70.2104219767771
    X.loc[rng.random(n) < 0.1, "score"] = 1000.0 + 62.84115523465704
    y = ((X.score - 1000 + X.burden / 3 + 20 * X.ratio + rng.normal(0, 5, n)) > 85).astype(int)
    ds = validate_frame(X.assign(label=y), "label")
    pre = Preprocessor(corr_threshold=None).fit(X.iloc[: n // 2], ds)
    assert pre.writings_["burden"].exceptions.tolist() == [70.2104219767771]
    assert pre.integer_mask_.tolist() == [False, False, False]  # not every value is an integer
    back = pre.inverse_transform(pre.transform(X))
    pd.testing.assert_frame_equal(back, X, check_exact=True)
    model = HistGradientBoostingClassifier(max_iter=60, random_state=0).fit(X.iloc[: n // 2], y.iloc[: n // 2])
    np.testing.assert_array_equal(model.predict_proba(back), model.predict_proba(X))
    # a value between the data's (a search's candidate) is left as it is
    Z = pre.transform(X.iloc[:50])
    j = pre.feature_names_out_.index("burden")
    Z[:, j] += 0.37 / pre.unit_scale_[j]
    np.testing.assert_allclose(pre.inverse_transform(Z)["burden"], X["burden"].iloc[:50] + 0.37, rtol=1e-12)


@pytest.mark.parametrize("method", ["cadex", "dice"])
def test_a_gradient_search_never_moves_a_value_the_row_misses(method, monkeypatch) -> None:
    """CADEX's mask and DiCE's ``features_to_vary`` are per row: a row's missing value is not a feature its search
    may lean on (the projection takes that move back, and the counterfactual needs the driver's repair, or loses
    the model's acceptance: CADEX's validity fell to 0.63 when its own output was projected before that repair)."""
    from recourse_privacy.models import make_model
    from recourse_privacy.recourse import base, fit_for, make_recourse

    df = _gappy(1500, seed=3)
    X = df.drop(columns="label")
    pre = Preprocessor().fit(X, validate_frame(df, "label"))
    Z, y = pre.transform(X), df["label"].to_numpy()
    model = make_model("logistic", random_state=0).fit(Z, y)
    acts = ActionSet.from_preprocessor(pre)
    rejected = Z[model.predict(Z) == 0][:120]
    held = acts.held(rejected)
    assert held.any(axis=1).mean() > 0.3  # many targets miss a value
    raw = {}
    project = base.project_and_repair

    def spy(action_set, model, X, X_cf, norm="l1"):
        raw["cf"] = np.array(X_cf)
        return project(action_set, model, X, X_cf, norm)

    monkeypatch.setattr(base, "project_and_repair", spy)
    searcher = make_recourse(method, action_set=acts, **({"random_state": 0} if method == "dice" else {}))
    res = fit_for(searcher, Z[:1000], y[:1000], model).generate(model, rejected)
    np.testing.assert_array_equal(raw["cf"][held], rejected[held])  # the search's own output, before any projection
    gap_rows = held.any(axis=1)
    assert res.valid[gap_rows].mean() >= 0.95 and res.valid[~gap_rows].mean() >= 0.95
