"""A row-wise model scored once per distinct row: the same values, fewer rows through the model.

Black-box searches project their candidates onto the action set (integers rounded, one category per
one-hot group), so their batches repeat rows; the tree ensembles and users' pipelines that score them
cost tens of microseconds a row.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from recourse_privacy.models import distinct, make_model
from recourse_privacy.models.distinct import MIN_ROWS, distinct_rows, on_distinct_rows
from recourse_privacy.recourse import ActionSet, fit_for, make_recourse


def _repeating(n: int, seed: int = 0) -> np.ndarray:
    """Rows on a coarse lattice: many repeats."""
    return np.round(np.random.default_rng(seed).normal(size=(n, 4)))


def _check_grouping(X: np.ndarray, first: np.ndarray, inverse: np.ndarray) -> None:
    """``X[first][inverse]`` rebuilds ``X``, the ``first`` rows are distinct and each is its row's first occurrence."""
    np.testing.assert_array_equal(X[first][inverse], X)  # -0.0 == 0.0
    assert len(first) == len(np.unique(X + 0.0, axis=0))
    for k in first:
        assert not (X[:k] == X[k]).all(axis=1).any()


def test_distinct_rows_rebuild_the_batch_and_are_distinct():
    X = _repeating(2000)
    first, inverse = distinct_rows(X)
    _check_grouping(X, first, inverse)
    assert len(first) < len(X)
    assert distinct_rows(X, max_share=0.5 * len(first) / len(X)) is None


def test_rows_sharing_a_projection_are_told_apart_by_their_values(monkeypatch):
    X = _repeating(1000)

    class Flat:  # a projection that maps every row to 0: every pair of rows shares it
        def __init__(self, seed):
            pass

        def standard_normal(self, n):
            return np.zeros(n)

    monkeypatch.setattr(distinct.np.random, "default_rng", Flat)
    _check_grouping(X, *distinct_rows(X))


def test_rows_with_nan_are_grouped_by_their_bytes():
    X = _repeating(600)
    X[::7, 1] = np.nan
    first, inverse = distinct_rows(X)
    np.testing.assert_array_equal(X[first][inverse], X)  # NaN where NaN, every value in place
    assert len(first) == len({(r + 0.0).tobytes() for r in X}) < len(X)


def test_the_model_sees_each_distinct_row_once_and_every_row_gets_its_value():
    X = _repeating(3000)
    seen = []

    def fn(R):
        seen.append(len(R))
        return R[:, 0] - 2.0 * R[:, 1] + 0.5 * R[:, 2] + 3.0 * R[:, 3] + np.sin(R[:, 0])  # elementwise: no blocking

    out = on_distinct_rows(fn, X)
    np.testing.assert_array_equal(out, fn(X))  # the direct call: bit for bit
    assert seen[0] == len(np.unique(X + 0.0, axis=0)) < len(X) // 4


def test_short_or_mostly_distinct_batches_go_through_whole():
    seen = []

    def fn(R):
        seen.append(len(R))
        return R.sum(axis=1)

    on_distinct_rows(fn, _repeating(MIN_ROWS - 1))  # short
    on_distinct_rows(fn, np.random.default_rng(1).normal(size=(1000, 4)))  # all distinct
    on_distinct_rows(fn, np.zeros((0, 4)))
    assert seen == [MIN_ROWS - 1, 1000, 0]


@pytest.mark.parametrize("name", ["xgboost", "lightgbm"])
def test_growing_spheres_on_boosted_trees_finds_the_same_counterfactuals_scoring_fewer_rows(name, monkeypatch):
    # integer features (the action set rounds them): the search's candidates repeat
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(500, 4)) * 2)
    y = ((X[:, 0] + X[:, 1] - 0.5 * X[:, 2]) > 1).astype(int)
    model = make_model(name, random_state=0, n_estimators=40).fit(X, y)
    rejected = X[model.predict(X) == 0][:60]
    actions = replace(ActionSet.unconstrained(4), integer=np.ones(4, dtype=bool))
    margin = type(model)._margin
    scored = []

    def counting(self, R):
        scored.append(len(R))
        return margin(self, R)

    monkeypatch.setattr(type(model), "_margin", counting)

    def search():
        gs = make_recourse("gs", random_state=0, action_set=actions, n_search_samples=200)
        return fit_for(gs, X, y, model).generate(model, rejected)

    fewer = search()
    n_fewer, scored[:] = sum(scored), []
    monkeypatch.setattr(distinct, "MIN_ROWS", 10**12)  # every batch scored whole
    whole = search()
    np.testing.assert_array_equal(fewer.counterfactuals, whole.counterfactuals)
    np.testing.assert_array_equal(fewer.valid, whole.valid)
    assert fewer.valid.mean() > 0.9
    assert n_fewer < sum(scored) / 2


def test_a_users_pipeline_scores_distinct_rows_only():
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    from recourse_privacy.data.preprocessing import Preprocessor
    from recourse_privacy.models.estimator import EstimatorModel

    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"age": rng.integers(18, 70, 400), "kind": rng.choice(["a", "b", "c"], 400)})
    y = ((frame.age > 40) ^ (frame.kind == "b")).astype(int).to_numpy()
    pipe = Pipeline(
        [
            ("pre", ColumnTransformer([("c", OneHotEncoder(), ["kind"])], remainder="passthrough")),
            ("gb", GradientBoostingClassifier(n_estimators=20, random_state=0)),
        ]
    ).fit(frame, y)
    pre = Preprocessor(corr_threshold=None).fit(frame)  # text columns are categorical
    m = EstimatorModel(pipe, pre, estimator_=pipe)
    X = pre.transform(frame.sample(2000, replace=True, random_state=0))
    calls = []
    proba = pipe.predict_proba

    def spy(F):
        calls.append(len(F))
        return proba(F)

    pipe.predict_proba = spy
    z = m.decision_function(X)
    assert calls == [len(np.unique(X, axis=0))] and calls[0] <= 400
    p = np.clip(proba(m.decode(X))[:, 1], 1e-12, 1 - 1e-12)
    np.testing.assert_allclose(z, np.log(p) - np.log1p(-p), rtol=0, atol=0)
