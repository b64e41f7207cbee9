"""Sparse answers: a bundle's counterfactual keeps only the changes its model's acceptance needs (greedy, smallest
change first), each answer still accepted, for a DP method post-processing of its release."""

from __future__ import annotations

import json

import numpy as np
import pytest

from _service_util import BOUNDS, applicant, tiny_dataset
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.service.bundle import load_bundle, publish
from recourse_privacy.service.schema import Applicants, schema_from_dataset
from recourse_privacy.service.served_model import LinearModel
from recourse_privacy.service.sparsify import sparsify

pytest.importorskip("fastapi")


def _docs() -> list[dict]:
    jobs = ("clerk", "manager", "worker")
    return [applicant(hours=h % 60, income=1.3 * h + 0.5, age=20 + h % 50, job=jobs[h % 3]) for h in range(0, 120, 2)]


def test_sparsify_sets_back_every_change_the_model_does_not_need() -> None:
    """A linear rule on income alone: of a counterfactual that changed every mutable feature, only income's change
    is left (raised as far as the counterfactual raised it), in the rows marked valid; the others untouched."""
    schema = schema_from_dataset(tiny_dataset(), BOUNDS)
    names = schema.model_feature_names()
    coef = np.zeros(schema.n_model)
    coef[names.index("income")] = 10.0
    model = LinearModel(coef, -5.0)  # accepted where income > half its range (125)
    fact = schema.parse_many([applicant(income=50.0 + i, hours=10, job="clerk") for i in range(6)])
    cf = schema.parse_many([applicant(income=200.0, hours=70, job="manager", age=40) for _ in range(6)])
    ok = np.array([True, True, True, True, False, False])
    out = sparsify(schema, model, fact, cf, ok)
    assert model.decide(out, schema.encode(out))[ok].all()
    for i in range(4):  # only income changed, as far as the counterfactual took it
        assert schema.as_dicts(out.take([i]))[0] == {**schema.as_dicts(fact.take([i]))[0], "income": 200}
    np.testing.assert_array_equal(out.num[~ok], cf.num[~ok])
    np.testing.assert_array_equal(out.cat[~ok], cf.cat[~ok])
    # a rule that needs two changes keeps both
    coef[names.index("hours")] = 10.0
    two = LinearModel(coef, -14.0)  # income and hours both high (200 and 70: 8 + 7 > 14)
    both = sparsify(schema, two, fact, cf, np.ones(6, bool))
    assert (schema.changed(fact, both).sum(1) == 2).all() and two.decide(both, schema.encode(both)).all()
    nothing = sparsify(schema, two, fact, cf, np.zeros(6, bool))
    assert isinstance(nothing, Applicants) and np.array_equal(nothing.num, cf.num)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The same privrecourse release (same seed) published sparse (its default) and not."""
    ds = tiny_dataset(600)
    out = {}
    for sparse in (None, False):
        path = tmp_path_factory.mktemp(f"sparse-{sparse}")
        man = publish(ds, method="privrecourse", epsilon=4.0, out=path, bounds=BOUNDS, n_clusters=30, sparse=sparse)
        out[sparse] = (path, man)
    return out


def test_privrecourse_answers_are_sparse_by_default_and_keep_their_validity(pair) -> None:
    (sparse_path, man), (plain_path, plain_man) = pair[None], pair[False]
    assert man["answers"]["sparse"] is True and plain_man["answers"]["sparse"] is False
    docs = _docs()
    s, p = load_bundle(sparse_path, random_state=0), load_bundle(plain_path, random_state=0)
    assert s.sparse and not p.sparse
    a_s, a_p = s.answer(s.schema.parse_many(docs)), p.answer(p.schema.parse_many(docs))
    assert [a["decision"] for a in a_s] == [a["decision"] for a in a_p]
    fewer = 0
    for x, y in zip(a_s, a_p):
        assert x["valid"] == y["valid"]
        if y["counterfactual"] is None or not y["valid"]:
            assert x == y  # not found, or not valid: the method's answer as it is
            continue
        assert set(x["reasons"]) <= set(y["reasons"]) and x["cost"] <= y["cost"] + 1e-9
        for name in x["reasons"]:  # a change kept is the method's own change
            assert x["counterfactual"][name] == y["counterfactual"][name]
        fewer += len(x["reasons"]) < len(y["reasons"])
    assert fewer >= 0.5 * sum(a["valid"] for a in a_p)
    # the JSON text the server sends is exactly these answers'
    texts = load_bundle(sparse_path, random_state=0).answer_json(s.schema.parse_many(docs)).texts
    assert texts == [json.dumps(a, separators=(",", ":"), allow_nan=False) for a in a_s]


def test_a_bundle_without_the_key_answers_as_before_and_laplace_refuses_it(pair, tmp_path) -> None:
    path, _ = pair[False]
    man = json.loads((path / "manifest.json").read_text())
    del man["answers"]  # a bundle published before the option
    (path / "manifest.json").write_text(json.dumps(man))
    assert not load_bundle(path, random_state=0).sparse
    with pytest.raises(InvalidInputError, match="--sparse with --method laplace"):
        publish(tiny_dataset(300), method="laplace", epsilon=1.0, out=tmp_path / "l", bounds=BOUNDS, sparse=True)
    man = publish(tiny_dataset(300), method="dpm", epsilon=4.0, out=tmp_path / "d", bounds=BOUNDS, sparse=True)
    b = load_bundle(tmp_path / "d", random_state=0)
    answers = b.answer(b.schema.parse_many(_docs()))
    assert man["answers"]["sparse"] and all(a["valid"] for a in answers if a["counterfactual"] is not None)


def test_sparse_keep_is_the_same_in_blocks_of_rows(monkeypatch) -> None:
    """The trial subsets are built a block of rows at a time (memory bounded): one row per block gives the same
    changes as the whole batch at once."""
    import recourse_privacy.recourse.sparse as sp

    rng = np.random.default_rng(0)
    X, X_cf = rng.random((40, 6)), rng.random((40, 6))
    w = rng.normal(size=6)

    class _Rule:
        @staticmethod
        def predict(Z):
            return (Z @ w > np.median(X_cf @ w)).astype(int)

    valid = _Rule.predict(X_cf) == 1
    units = sp.feature_units(6)
    whole = sp.sparse_counterfactuals(_Rule, X, X_cf, valid, units)
    monkeypatch.setattr(sp, "_TRIAL_BLOCK", 1)
    np.testing.assert_array_equal(sp.sparse_counterfactuals(_Rule, X, X_cf, valid, units), whole)
    assert (_Rule.predict(whole)[valid] == 1).all() and ((whole != X).sum(1)[valid] < 6).any()


def _fewest_asking_every_trial(rows, ch, sz, accepts):
    """The first choice as it was written first: every trial asked in one call (the reference the staged one
    must equal)."""
    F = ch.shape[1]
    m = int(ch.sum(1).max())
    j = np.arange(1, m + 1)[None, :, None]
    trials = []
    for key in (sz, -sz):
        rank = np.empty((len(rows), F), np.int64)
        rank[np.arange(len(rows))[:, None], np.argsort(np.where(ch, key, np.inf), axis=1, kind="stable")] = np.arange(F)
        trials.append(ch[:, None, :] & (rank[:, None, :] < j))
    trials.append(ch[:, :, None] & np.eye(F, dtype=bool)[None])
    keep = np.concatenate(trials, axis=1)
    t = keep.shape[1]
    accepted = np.asarray(accepts(np.repeat(rows, t), keep.reshape(-1, F)), bool).reshape(len(rows), t)
    accepted &= keep.any(2)
    accepted[:, m - 1] = True
    count = keep.sum(2) + (keep * sz[:, None, :]).sum(2) / (1.0 + sz.sum(1))[:, None]
    return keep[np.arange(len(rows)), np.argmin(np.where(accepted, count, np.inf), axis=1)]


@pytest.mark.parametrize("seed", range(4))
def test_the_staged_first_choice_equals_asking_every_trial_with_fewer_rows_asked(monkeypatch, seed) -> None:
    """Each change alone first, the prefixes only where none is accepted and never a trial whose answer is known
    (an empty one, a duplicate of a change alone, the answer itself): the same changes kept as asking every
    trial, on rules that need one, two or three changes, with ties in the sizes; fewer trial rows asked."""
    import recourse_privacy.recourse.sparse as sp

    rng = np.random.default_rng(seed)
    n, F = 60, 7
    X = rng.random((n, F))
    X_cf = np.where(rng.random((n, F)) < 0.7, np.round(rng.random((n, F)), 1), X)  # some unchanged, tied sizes
    w = rng.normal(size=F) * (rng.random(F) < 0.6)
    cut = np.quantile(X_cf @ w, 0.3)
    asked = []

    class _Rule:
        @staticmethod
        def predict(Z):
            asked.append(len(Z))
            return (Z @ w > cut).astype(int)

    valid = _Rule.predict(X_cf) == 1
    units = sp.feature_units(F)
    staged = sp.sparse_counterfactuals(_Rule, X, X_cf, valid, units)
    staged_rows = sum(asked[1:])
    monkeypatch.setattr(sp, "_fewest_in_block", _fewest_asking_every_trial)
    asked.clear()
    every = sp.sparse_counterfactuals(_Rule, X, X_cf, valid, units)
    np.testing.assert_array_equal(staged, every)
    assert staged_rows < sum(asked)
    assert (_Rule.predict(staged)[valid] == 1).all()
    assert len(set((staged != X).sum(1)[valid])) >= 2  # answers with different numbers of changes kept
