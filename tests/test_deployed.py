"""The as-deployed audit (issue 24): the fitted instance never refitted, disjoint rows, exposure, groups, cache."""

from __future__ import annotations

import hashlib
import json
import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder
from sklearn.tree import DecisionTreeClassifier

import recourse_privacy.audit.stages as stages
from recourse_privacy import run_audit, strict_json
from recourse_privacy.cache import ArtifactCache
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.exposure import (
    delong_variance,
    group_exposure,
    holm,
    identified_at_fpr,
    nonmember_percentiles,
)

FIT_CALLS: list[int] = []


class RecordingTree(DecisionTreeClassifier):
    """A decision tree that records which instance each ``fit`` ran on."""

    def fit(self, X, y, sample_weight=None, check_input=True):
        FIT_CALLS.append(id(self))
        return super().fit(X, y, sample_weight=sample_weight, check_input=check_input)


def _frame(n: int = 400, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "g": rng.choice(["x", "y"], n)})
    df["label"] = ((df.a + 0.5 * df.b + rng.normal(scale=0.7, size=n)) > 0.4).astype(int)
    return df, rng.random(n) < 0.5


def _pipeline(tree=RecordingTree) -> Pipeline:
    prep = ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), ["g"])], remainder="passthrough")
    return Pipeline([("prep", prep), ("clf", tree(max_depth=8, random_state=0))])


@pytest.fixture(scope="module")
def deployed():
    df, mask = _frame()
    pipe = _pipeline().fit(df[mask].drop(columns="label"), df.label[mask])
    return df, mask, pipe


SMALL = dict(target="label", recourse="gs", shadow_models=2, n_members=100, cache="off")


def test_the_deployed_model_is_never_refitted_and_predicts_as_the_file(deployed):
    df, mask, pipe = deployed
    before = hashlib.sha256(pickle.dumps(pipe)).hexdigest()
    FIT_CALLS.clear()
    r = run_audit(model=pipe, data=df, members=mask, attacks=("cfd", "cfd-lrt", "loss"), **SMALL)
    assert FIT_CALLS, "the reference models are clones trained by the recipe"
    assert id(pipe.named_steps["clf"]) not in FIT_CALLS  # never refitted
    assert hashlib.sha256(pickle.dumps(pipe)).hexdigest() == before  # nor changed
    ex = r.arrays.exposure
    expected = pipe.predict_proba(df.drop(columns="label").iloc[ex["row"].to_numpy()])[:, 1]
    np.testing.assert_allclose(ex["p_favourable"].to_numpy(), expected, rtol=0, atol=1e-12)
    assert (ex["decision"] == 0).all()  # the targets are the rows it rejects
    assert r.question == "this deployed model" and r.to_dict()["question"] == "this deployed model"
    assert r.deployed.train_rows == int(mask.sum()) and r.deployed.holdout_rows == int((~mask).sum())
    assert set(ex.loc[ex["member"], "row"]) <= set(np.flatnonzero(mask))
    assert set(ex.loc[~ex["member"], "row"]) <= set(np.flatnonzero(~mask))


def test_targets_and_reference_rows_are_disjoint(deployed, monkeypatch):
    df, mask, pipe = deployed
    calls = []
    real = stages.run_shadow_models

    def spy(make_model, method, X_pool, y_pool, X_targets, y_targets, **kw):
        calls.append((np.array(X_pool), np.array(X_targets), kw.get("online", False)))
        return real(make_model, method, X_pool, y_pool, X_targets, y_targets, **kw)

    monkeypatch.setattr(stages, "run_shadow_models", spy)
    r = run_audit(model=pipe, data=df, members=mask, attacks=("cfd-lrt", "loss-lrt-online"), **SMALL)
    pools = r.pools
    drawn = np.r_[pools.members, pools.nonmembers]
    assert not set(pools.adversary) & set(drawn)
    assert len(set(pools.members)) + len(set(pools.nonmembers)) == len(set(drawn))
    assert set(r.arrays.exposure["row"]) <= set(drawn)
    offline = [c for c in calls if not c[2]]
    assert offline and len(calls) == 2
    X_pool, X_targets, _ = offline[0]
    pool_rows, target_rows = {row.tobytes() for row in X_pool}, {row.tobytes() for row in X_targets}
    assert not pool_rows & target_rows  # no reference model of the offline attacks saw a target
    assert r.deployed.online_references_include_targets  # the online ones may, and the report says so


def test_membership_from_two_files_is_the_same_as_from_a_column(deployed, tmp_path):
    df, mask, pipe = deployed
    a = run_audit(model=pipe, data=df.assign(in_train=mask.astype(int)), members="in_train", attacks=("cfd",), **SMALL)
    train, hold = tmp_path / "train.csv", tmp_path / "hold.csv"
    df[mask].to_csv(train, index=False)
    df[~mask].to_csv(hold, index=False)
    b = run_audit(model=pipe, data=str(train), holdout=str(hold), attacks=("cfd",), **SMALL)
    assert (a.deployed.train_rows, a.deployed.holdout_rows) == (b.deployed.train_rows, b.deployed.holdout_rows)
    assert set(b.arrays.exposure["source"]) == {"train", "holdout"}
    src = b.arrays.exposure
    assert (src.loc[src["member"], "source"] == "train").all()


def test_bad_deployed_inputs_are_refused_before_work(deployed):
    df, mask, pipe = deployed
    with pytest.raises(InvalidInputError, match="1/0 or true/false"):
        run_audit(model=pipe, data=df.assign(m=np.where(mask, "yes", "maybe")), members="m", **SMALL)
    with pytest.raises(InvalidInputError, match="not fitted"):
        run_audit(model=_pipeline(), data=df, members=mask, **SMALL)
    with pytest.raises(InvalidInputError, match="registered model"):
        run_audit(model="logistic", data=df, members=mask, **SMALL)
    with pytest.raises(InvalidInputError, match="not found"):
        run_audit(model=pipe, data=df, members="nope", **SMALL)
    with pytest.raises(InvalidInputError, match="group column"):
        run_audit(model=pipe, data=df, members=mask, groups=("nope",), attacks=("cfd",), **SMALL)


def test_outputs_exposure_groups_and_the_report(deployed, tmp_path):
    df, mask, pipe = deployed
    r = run_audit(
        model=pipe, data=df, members=mask, attacks=("cfd", "loss", "random"), groups=("g", "label"),
        out_dir=tmp_path / "out", **SMALL,
    )  # fmt: skip
    out = tmp_path / "out"
    ex = pd.read_csv(out / "exposure.csv")
    assert {"row", "member", "decision", "cfd_score", "cfd_percentile", "identified_fpr_0.01"} <= set(ex.columns)
    assert len(ex) == r.n_members + r.n_nonmembers
    groups = pd.read_csv(out / "groups.csv")
    assert set(groups["column"]) == {"g", "label"} and set(groups["attack"]) == {"cfd", "loss"}
    m = json.loads((out / "metrics.json").read_text())
    assert m["question"] == "this deployed model" and m["deployed"]["train_rows"] == int(mask.sum())
    assert len(m["exposure"]["most_exposed"]) == 10
    html = (out / "report.html").read_text()
    assert "this deployed model" in html and "Exposure by group" in html and "Exposure of single records" in html
    from recourse_privacy.audit import AuditResult

    back = AuditResult.from_dict(m)
    assert back.deployed == r.deployed

    # an undefined number (inf, nan) is written as null with its reason and read back as nan: compared as written
    def written(obj):
        obj = strict_json.finite(obj)
        if isinstance(obj, dict):
            return {k: written(v) for k, v in obj.items() if not k.endswith("_reason")}
        return [written(v) for v in obj] if isinstance(obj, list) else obj

    assert written(back.to_dict()["exposure"]) == written(r.to_dict()["exposure"])
    assert written(back.to_dict()["groups"]) == written(m["groups"])


def test_a_second_audit_of_the_same_model_reads_its_reference_models_from_the_cache(deployed, tmp_path):
    df, mask, pipe = deployed
    kw = {**SMALL, "attacks": ("cfd-lrt", "loss-lrt-online")}
    first, second = ArtifactCache(tmp_path / "c"), ArtifactCache(tmp_path / "c")
    a = run_audit(model=pipe, data=df, members=mask, **{**kw, "cache": first})
    b = run_audit(model=pipe, data=df, members=mask, **{**kw, "cache": second})
    assert first.stats["shadow models"].misses == 4 and first.stats["shadow models"].hits == 0
    s = second.stats
    assert s["shadow models"].hits == 4 and s["shadow models"].misses == 0
    assert s["shadow recourse"].hits > 0 and s["shadow recourse"].misses == 0
    for name in a.attacks:
        np.testing.assert_array_equal(a.scores[name].scores, b.scores[name].scores)


def test_the_recipe_mode_still_answers_the_recipe_question(deployed):
    df, _mask, pipe = deployed
    r = run_audit(model=pipe, data=df, attacks=("cfd",), **{**SMALL, "n_members": 120})
    assert r.question == "this recipe, re-trained" and r.deployed is None


# ------------------------------------------------------------------ the statistics


def test_percentiles_and_identified_members_read_only_the_nonmembers():
    member = np.array([1, 1, 1, 0, 0, 0, 0], bool)
    scores = np.array([9.0, 3.0, 0.0, 1.0, 2.0, 3.0, 4.0])
    np.testing.assert_allclose(nonmember_percentiles(scores, member), [100, 62.5, 0, 12.5, 37.5, 62.5, 87.5])
    flags, threshold, reached = identified_at_fpr(scores, member, 0.25)  # one of four non-members may pass
    assert threshold == 4.0 and reached == 0.25 and flags.tolist() == [True, False, False, False, False, False, True]
    moved = scores.copy()
    moved[1] = -5.0  # a member's score below the threshold does not move it
    assert identified_at_fpr(moved, member, 0.25)[1] == threshold


def test_holm_and_delong():
    np.testing.assert_allclose(holm([0.01, 0.04, np.nan, 0.03]), [0.03, 0.06, np.nan, 0.06])
    rng = np.random.default_rng(1)
    member = rng.random(60) < 0.5
    s = rng.normal(size=60) + member
    pos, neg = s[member], s[~member]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    expected = v10.var(ddof=1) / len(pos) + v01.var(ddof=1) / len(neg)
    assert delong_variance(s, member) == pytest.approx(expected, rel=1e-12)


def test_a_leaking_group_is_flagged_and_the_others_are_not():
    rng = np.random.default_rng(0)
    n = 900
    member = rng.random(n) < 0.5
    group = rng.choice(["a", "b", "c"], n)
    scores = rng.normal(size=n) + 1.5 * (member & (group == "a"))
    rows = {g.value: g for g in group_exposure("col", group, scores, member, attack="x", n_boot=200)}
    assert rows["a"].flagged and not rows["b"].flagged and not rows["c"].flagged
    assert rows["a"].auc_ci[0] > 0.5 and rows["a"].p_holm >= rows["a"].p_value
    assert rows["b"].n_members + rows["b"].n_nonmembers == int((group == "b").sum())


def test_cli_audits_the_deployed_model_from_a_skops_file(deployed, tmp_path):
    import skops.io as sio
    from typer.testing import CliRunner

    from recourse_privacy.cli import app

    df, mask, _ = deployed
    pipe = _pipeline(DecisionTreeClassifier).fit(df[mask].drop(columns="label"), df.label[mask])
    sio.dump(pipe, tmp_path / "m.skops")
    df.assign(in_train=mask.astype(int)).to_csv(tmp_path / "d.csv", index=False)
    common = ["audit", "--target", "label", "--model-file", str(tmp_path / "m.skops"), "--recourse", "gs"]
    common += ["--trust", "sklearn.tree._tree.Tree"]
    common += ["--attacks", "cfd,loss", "--n-members", "100", "--cache-dir", "off"]
    res = CliRunner().invoke(
        app, [*common, "--data", str(tmp_path / "d.csv"), "--members", "in_train", "--group", "g", "--out",
              str(tmp_path / "o")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "question answered: this deployed model" in res.output
    assert (tmp_path / "o" / "exposure.csv").is_file() and (tmp_path / "o" / "groups.csv").is_file()
    res = CliRunner().invoke(app, [*common, "--train-data", str(tmp_path / "d.csv"), "--out", str(tmp_path / "p")])
    assert res.exit_code != 0 and "--train-data and --holdout-data go together" in res.output
    res = CliRunner().invoke(app, ["audit", "--help"], env={"COLUMNS": "200"})
    text = " ".join(res.output.replace("\u2502", " ").split())  # rich's box and wrapping undone
    assert "'this recipe, re-trained'" in text and "'this deployed model'" in text


def test_the_owners_fitted_recourse_learns_from_the_whole_deployed_training_set(deployed, monkeypatch):
    """A graph or a VAE of the deployed model's recourse is built from every row the model trained on (as each
    reference model's is built from its own), not only from the members drawn as targets; the reported accuracies
    are the model's on its whole sides."""
    df, mask, pipe = deployed
    seen = []
    real = stages.owner_recourse

    def spy(config, defense, method, targets, fit_X, fit_y, *rest, **kw):
        seen.append((np.array(fit_X), np.array(fit_y), np.array(targets.X)[targets.is_member == 1]))
        return real(config, defense, method, targets, fit_X, fit_y, *rest, **kw)

    monkeypatch.setattr(stages, "owner_recourse", spy)
    r = run_audit(model=pipe, data=df, members=mask, attacks=("cfd",), **SMALL)
    fit_X, fit_y, member_targets = seen[0]
    assert len(fit_X) == int(mask.sum()) > len(r.pools.members)  # the whole training set, more than the draw
    np.testing.assert_array_equal(fit_y, df.label.to_numpy()[mask])
    rows = {row.tobytes() for row in fit_X}
    assert {row.tobytes() for row in member_targets} <= rows  # the member targets are among them
    # the accuracies are the model's own on its whole training and holdout sides, not on the candidates drawn
    X, y = df.drop(columns="label"), df.label.to_numpy()
    assert r.model.train_accuracy == pytest.approx(np.mean(pipe.predict(X[mask]) == y[mask]), abs=1e-12)
    assert r.model.test_accuracy == pytest.approx(np.mean(pipe.predict(X[~mask]) == y[~mask]), abs=1e-12)


def test_a_released_set_is_checked_for_copies_of_every_training_row(deployed):
    """FACE answers with training points; as deployed its graph holds every row the model trained on, and the
    release threat counts a counterfactual that copies any of them, not only the members drawn as targets."""
    df, mask, pipe = deployed
    r = run_audit(model=pipe, data=df, members=mask, attacks=("cfd",), threats=("release",), release_size=60,
                  **{**SMALL, "recourse": "face"})  # fmt: skip
    rel = r.threats.release
    ids = np.asarray(rel.copied_row_ids)
    assert rel.exact_copies > 0 and len(ids) and mask[ids].all()  # training rows, and only those
    assert not np.isin(ids, r.pools.members).all()  # beyond the members drawn
