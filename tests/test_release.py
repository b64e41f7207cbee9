"""audit --threats release (issue 26): the released-set attacks (dcr, DOMIAS against a direct computation,
set-shadow), exact copies of training rows, release.csv, the report's warning, the CLI's refusals and
Anonymeter's risks (skipped with the reason where the extra does not import)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from recourse_privacy.attacks.release_report import AnonymeterRisk, ReleaseRow, ReleaseSummary
from recourse_privacy.attacks.released_set import (
    RELEASE_ATTACKS,
    ReleaseInputs,
    copied_rows,
    dcr_scores,
    domias_scores,
    keep_matrix,
    set_shadow_scores,
)
from recourse_privacy.audit.anonymeter_risks import anonymeter_available, risks_of_frames
from recourse_privacy.metrics.membership import auc


def _direct_log_kde(sample: np.ndarray, points: np.ndarray) -> np.ndarray:
    """A Gaussian KDE written out: Scott's factor n^(-1/(d+4)) times the sample covariance, log of the mean kernel."""
    n, d = sample.shape
    cov = np.cov(sample.T, bias=False).reshape(d, d) * n ** (-2.0 / (d + 4))
    inv, (_, logdet) = np.linalg.inv(cov), np.linalg.slogdet(cov)
    diff = points[:, None, :] - sample[None]
    quad = np.einsum("ijk,kl,ijl->ij", diff, inv, diff)
    log_k = -0.5 * quad - 0.5 * (d * np.log(2 * np.pi) + logdet)
    m = log_k.max(1, keepdims=True)
    return (m + np.log(np.exp(log_k - m).mean(1, keepdims=True)))[:, 0]


def test_domias_is_the_log_density_ratio_computed_directly():
    rng = np.random.default_rng(0)
    released, reference, targets = rng.normal(size=(300, 3)), rng.normal(1, 2, size=(400, 3)), rng.normal(size=(50, 3))
    scale = reference.std(0)
    ours = domias_scores(released, targets, reference, scale)
    direct = _direct_log_kde(released / scale, targets / scale) - _direct_log_kde(reference / scale, targets / scale)
    np.testing.assert_allclose(ours, direct, rtol=1e-4, atol=1e-4)


def test_domias_cross_checked_against_the_domias_package():
    domias = pytest.importorskip("domias", reason="the domias package is not installed (an optional cross-check)")
    assert domias  # the direct computation above is the check where it is absent


def test_domias_finds_local_overfitting_and_reduces_high_dimensions():
    rng = np.random.default_rng(1)
    reference = rng.normal(size=(600, 12))
    members, nonmembers = rng.normal(size=(100, 12)), rng.normal(size=(100, 12))
    released = np.repeat(members, 3, axis=0) + rng.normal(0, 0.05, (300, 12))  # overfitted to the members
    targets = np.vstack([members, nonmembers])
    label = np.r_[np.ones(100), np.zeros(100)]
    s = domias_scores(released, targets, reference, reference.std(0))  # 12 > 8 dimensions: PCA
    assert s.shape == (200,) and np.isfinite(s).all()
    assert auc(label, s) > 0.8


def test_dcr_scores_a_copied_target_highest():
    rng = np.random.default_rng(2)
    targets = rng.normal(size=(20, 4))
    released = np.vstack([targets[:5], rng.normal(size=(50, 4)) + 3])
    s = dcr_scores(released, targets, np.ones(4))
    assert np.all(s[:5] == 0) and np.all(s[5:] < 0)


def test_copied_rows_both_ways():
    train = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    released = np.array([[2.0, 3.0 + 1e-9], [9.0, 9.0], [2.0, 3.0]])
    assert copied_rows(released, train).tolist() == [False, True, False]
    assert copied_rows(train, released).tolist() == [True, False, True]


def test_keep_matrix_is_balanced():
    k = keep_matrix(7, 8, seed=0)
    assert k.shape == (8, 7) and np.all(k.sum(0) == 4)
    with pytest.raises(Exception, match="even"):
        keep_matrix(7, 3, seed=0)


def test_set_shadow_learns_from_the_adversarys_own_simulations():
    rng = np.random.default_rng(3)
    targets, reference = rng.normal(size=(80, 4)), rng.normal(size=(400, 4))
    noise = rng.normal(size=(100, 4))

    def simulate(keep, k):  # a recipe that publishes its training rows (as FACE does)
        return np.vstack([targets[keep], noise]), None

    member = np.r_[np.ones(40, int), np.zeros(40, int)]
    real = np.vstack([targets[member == 1], noise])
    inputs = ReleaseInputs(real, targets, reference, simulate=simulate, n_shadow=4, random_state=0)
    s = set_shadow_scores(inputs)
    assert auc(member, s) > 0.9
    assert set(RELEASE_ATTACKS.names()) == {"dcr", "domias", "set-shadow", "golob-mst"}


def test_release_summary_round_trips_and_warns():
    row = ReleaseRow("face", "dcr", 0.6, 0.55, 0.65, 0.02, 0.01, 0.05, 12, 3)
    risk = AnonymeterRisk("inference", 0.1, 0.0, 0.2, 100, "secret sex")
    s = ReleaseSummary("face", 100, 90, False, "how", (row,), 12, 3, (5, 9), (risk,), "", ("n",))
    d = json.loads(json.dumps(s.to_dict()))
    assert ReleaseSummary.from_dict(d) == s
    assert "publishes training rows" in d["warning"] and "12 of the 90" in d["warning"]
    clean = ReleaseSummary("gs", 100, 90, False, "how", (), 0, 0)
    assert clean.warning() is None


def test_an_attack_that_ties_every_target_is_flagged_as_having_no_power():
    """An AUC of 0.5 from scores that are all equal says nothing about the release (stop 46: HELOC's set-shadow
    against PrivRecourse tied every target). The row keeps the share of targets at the most common score, and the
    report, the CLI's table and release.csv say when it is every target, or at least half."""
    from rich.console import Console

    from recourse_privacy.audit.release import tied_share
    from recourse_privacy.report.release import release_section, release_table

    assert tied_share(np.zeros(7)) == 1.0
    assert tied_share(np.array([0.1, 0.2, 0.2, 0.3])) == 0.5
    assert tied_share(np.arange(4.0)) == 0.25
    tied = ReleaseRow("privrecourse", "set-shadow", 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0, 0, tied_share=1.0)
    half = ReleaseRow("privrecourse", "dcr", 0.52, 0.47, 0.57, 0.01, 0.0, 0.03, 0, 0, tied_share=0.6)
    spread = ReleaseRow("privrecourse", "domias", 0.51, 0.46, 0.56, 0.01, 0.0, 0.03, 0, 0, tied_share=0.01)
    assert tied.no_power and not half.no_power and not spread.no_power
    assert spread.power_note() == "" and "60%" in half.power_note()
    s = ReleaseSummary("privrecourse", 100, 90, False, "how", (tied, half, spread), 0, 0)
    assert ReleaseSummary.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    html = release_section(s)
    assert html.count("no power: every target got the same score") == 1 and "60% of the targets tied" in html
    console = Console(width=200, record=True)
    console.print(release_table(s))
    assert "no power" in console.export_text()
    old = {k: v for k, v in spread.to_dict().items() if k != "tied_share"}  # a row written before stop 47
    assert ReleaseRow(**old).tied_share == -1.0 and ReleaseRow(**old).power_note() == ""


@pytest.fixture(scope="module")
def face_audit(tmp_path_factory):
    from recourse_privacy.audit import run_audit

    out = tmp_path_factory.mktemp("release")
    res = run_audit(
        dataset="synthetic",
        n_features=4,
        model="logistic",
        recourse="face",
        attacks=("cfd",),
        n_members=120,
        n_nonmembers=120,
        threats=("release",),
        release_size=60,
        out_dir=None,
    )
    from recourse_privacy.report.outputs import write_outputs

    write_outputs(res, out)
    return res, out


def test_audit_release_writes_release_csv_and_warns_on_copies(face_audit):
    res, out = face_audit
    rel = res.threats.release
    assert rel is not None and rel.method == "face"
    assert rel.exact_copies > 0 and rel.copied_row_ids  # FACE answers with accepted training points
    frame = pd.read_csv(out / "release.csv")
    assert list(frame.columns)[:8] == [
        "method",
        "attack",
        "auc",
        "auc_low",
        "auc_high",
        "tpr_at_1pct_fpr",
        "exact_copies",
        "copied_members",
    ]
    assert set(frame.attack) == {"dcr", "domias", "set-shadow"}
    assert ((frame.auc_low <= frame.auc) & (frame.auc <= frame.auc_high)).all()
    assert ((1 / (res.n_members + res.n_nonmembers) <= frame.tied_share) & (frame.tied_share <= 1)).all()
    report = (out / "report.html").read_text()
    assert "publishes training rows" in report and "queries (recourse)" in report
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["threats"]["release"]["exact_copies"] == rel.exact_copies


def test_release_file_is_in_the_audit_layout():
    from recourse_privacy.output_dir import LAYOUTS

    assert "release.csv" in LAYOUTS["audit"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--release-size", "10"], "--release-size applies to the release threat"),
        (["--release-with-factuals"], "--release-with-factuals applies to the release threat"),
        (["--threats", "release", "--release-size", "0"], "release_size"),
    ],
)
def test_cli_refuses_release_options_before_any_work(tmp_path, args, message):
    from recourse_privacy.cli import app

    r = CliRunner().invoke(app, ["audit", "--dataset", "synthetic", "--out", str(tmp_path / "o"), *args])
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split())
    assert not (tmp_path / "o").exists()


def test_cli_refuses_bad_input_where_click_is_not_installed(tmp_path, monkeypatch):
    """typer >= 0.17 vendors its own click and no longer installs click: a fresh environment (the Anonymeter one)
    has none, and the command must still refuse bad input with exit 2 rather than fail on ``import click``."""
    import builtins

    from recourse_privacy.cli import app

    real = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name == "click" or name.startswith("click."):
            raise ModuleNotFoundError("No module named 'click'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    out = tmp_path / "o"
    r = CliRunner().invoke(app, ["audit", "--dataset", "synthetic", "--out", str(out), "--release-size", "10"])
    assert r.exit_code == 2, r.output
    assert "--release-size applies to the release threat" in " ".join(r.output.split())


def test_anonymeter_risks_have_intervals():
    ok, why = anonymeter_available()
    if not ok:
        pytest.skip(why)
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(
        {
            "a": rng.integers(0, 5, 400),
            "b": rng.normal(size=400),
            "c": rng.choice(["x", "y"], 400),
            "d": rng.normal(size=400),
        }
    )
    ori, control = frame.iloc[:200], frame.iloc[200:]
    syn = ori.sample(150, random_state=0)
    risks = risks_of_frames(ori, syn, control, "c", seed=0, n_attacks=100)
    assert [r.risk for r in risks] == ["singling-out", "linkability", "inference"]
    for r in risks:
        assert r.low <= r.value <= r.high or np.isclose(r.value, r.low) or np.isclose(r.value, r.high)


# ---------------------------------------------------------------- Golob et al. (2024) on MST synthetic data


def _correlated(rng, n, d=4):
    """Rows in [0, 1)^d with a shared factor (so MST's tree carries signal), binned finely by 10 bins."""
    z = rng.normal(size=(n, 1))
    return np.clip(0.5 + 0.18 * (z + 0.8 * rng.normal(size=(n, d))), 0.0, 0.999)


def _beats_chance_by_a_binomial_bound(scores: np.ndarray, is_member: np.ndarray, alpha: float = 1e-3) -> None:
    """Calling "member" above the median score (a threshold from the scores alone, never from the labels) is right
    on k of n balanced targets; under no leakage k ~ Binomial(n, 1/2), so k must exceed its 1 - alpha quantile."""
    from scipy.stats import binom

    guess = scores > np.median(scores)
    k, n = int((guess == (is_member == 1)).sum()), len(scores)
    assert k > binom.ppf(1 - alpha, n, 0.5), (k, n)


def test_golob_mst_is_registered_and_needs_an_mst_recipe():
    entry = RELEASE_ATTACKS.get("golob-mst")
    assert "mst" in entry.needs
    inputs = ReleaseInputs(np.zeros((3, 2)), np.zeros((2, 2)), np.zeros((5, 2)))
    from recourse_privacy.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="MST recipe"):
        entry.obj(inputs)


def test_focal_weights_without_noise_pick_the_maximum_spanning_tree():
    from recourse_privacy.attacks.mst_marginals import MSTRecipe, focal_weights

    rng = np.random.default_rng(0)
    a = rng.random(3000)
    X = np.column_stack([a, np.clip(a + 0.01 * rng.normal(size=3000), 0, 0.999), rng.random(3000)])
    pairs, w = focal_weights(X, MSTRecipe(rho=np.inf, n_shadow=4), 1000, seed=0)
    got = {tuple(p): x for p, x in zip(pairs.tolist(), w)}
    assert got[(0, 1)] == 1.0  # the near-copy pair is selected in every shadow run
    assert w.sum() == pytest.approx(2.0)  # a tree on 3 features has 2 edges in every run


def test_golob_mst_finds_members_of_a_noiseless_marginal_release():
    """A release that keeps the members' marginals exactly (the members themselves, binned): far above chance."""
    from recourse_privacy.attacks.mst_marginals import MSTRecipe, golob_mst_scores

    rng = np.random.default_rng(0)
    mem, non, ref = _correlated(rng, 100), _correlated(rng, 100), _correlated(rng, 2000)
    targets, is_member = np.vstack([mem, non]), np.r_[np.ones(100), np.zeros(100)]
    scores = golob_mst_scores(mem, targets, ref, MSTRecipe(rho=np.inf), seed=0)
    _beats_chance_by_a_binomial_bound(scores, is_member)


@pytest.mark.slow
def test_golob_mst_beats_chance_on_an_unnoised_mst_release():
    """MST (the privrecourse-mst generator) at epsilon 1e6: noise ~0, so its marginals are the members'."""
    from recourse_privacy.attacks.mst_marginals import MSTRecipe, golob_mst_scores
    from recourse_privacy.privrecourse.baselines import cdp_rho, mst_synthetic_data

    rng = np.random.default_rng(0)
    mem, non, ref = _correlated(rng, 100), _correlated(rng, 100), _correlated(rng, 2000)
    syn, _, _ = mst_synthetic_data(mem, epsilon=1e6, iters=200, random_state=1)
    targets, is_member = np.vstack([mem, non]), np.r_[np.ones(100), np.zeros(100)]
    scores = golob_mst_scores(syn, targets, ref, MSTRecipe(rho=cdp_rho(1e6, 1e-9)), seed=0)
    _beats_chance_by_a_binomial_bound(scores, is_member)


def test_domias_on_a_release_too_small_for_a_density_gives_no_information():
    rng = np.random.default_rng(0)
    ref, targets = rng.normal(size=(50, 3)), rng.normal(size=(7, 3))
    assert (domias_scores(ref[:1], targets, ref, np.ones(3)) == 0).all()


def test_release_threat_study_names_eight_registered_methods():
    from recourse_privacy.recourse import RECOURSE_METHODS
    from recourse_privacy.reproductions.release_threat import METHODS, ReleaseThreatConfig

    assert len(METHODS) == 8 and set(ReleaseThreatConfig().methods) == set(METHODS)
    for recourse, _, defense, epsilon in METHODS.values():
        assert recourse in RECOURSE_METHODS.names()
        assert (defense == "none") == (epsilon is None)


@pytest.mark.slow
def test_release_threat_study_writes_both_tables(tmp_path):
    from recourse_privacy.reproductions.release_threat import ReleaseThreatConfig, run_release_threat

    cfg = ReleaseThreatConfig(
        datasets=("adult",), methods=("FACE",), n_members=60, release_size=30, mst_epsilons=(1e3,), mst_members=80,
        mst_iters=50,
    )  # fmt: skip
    rows, mst = run_release_threat(tmp_path, config=cfg)
    study = pd.read_csv(tmp_path / "release_threat.csv")
    assert set(study.attack) == {"dcr", "domias", "set-shadow"} and (study.exact_copies > 0).all()
    assert ((study.auc_low <= study.auc) & (study.auc <= study.auc_high)).all()
    assert set(pd.read_csv(tmp_path / "mst_attack.csv").attack) == {"golob-mst", "domias", "dcr"}
    assert all(r.anonymeter.startswith("skipped") for r in rows) or all("[" in r.anonymeter for r in rows)


def test_release_threat_study_resumes_and_runs_failed_methods_again(tmp_path, monkeypatch):
    """One method per process: a (dataset, method) already written is kept, a failed one runs again, and a run
    without MST epsilons leaves an earlier mst_attack.csv alone."""
    from recourse_privacy.reproductions import release_threat as rt

    calls: list[tuple[str, str]] = []
    fail = {("adult", "DPC")}

    def fake(dataset, label, cfg):
        calls.append((dataset, label))
        note = "failed: no release" if (dataset, label) in fail else ""
        return [
            rt.StudyRow(dataset, label, a, 0.5, 0.4, 0.6, 0.01, 3, 0, 10, "cfd", 0.55, "skipped", note)
            for a in ("dcr", "domias")
        ]

    monkeypatch.setattr(rt, "_method_rows", fake)
    (tmp_path / "mst_attack.csv").write_text("epsilon,attack\n1,golob-mst\n")
    cfg = rt.ReleaseThreatConfig(datasets=("adult",), methods=("FACE", "DPC"), mst_epsilons=())
    rt.run_release_threat(tmp_path, config=cfg)
    assert calls == [("adult", "FACE"), ("adult", "DPC")]
    rt.run_release_threat(
        tmp_path, config=rt.ReleaseThreatConfig(datasets=("adult",), methods=("FACE",), mst_epsilons=())
    )
    kept = pd.read_csv(tmp_path / "release_threat.csv", keep_default_na=False)
    assert len(calls) == 2 and (kept.method == "DPC").sum() == 2  # FACE not run again, DPC's failure kept
    fail.clear()
    rows, _ = rt.run_release_threat(tmp_path, config=rt.ReleaseThreatConfig(datasets=("adult",), mst_epsilons=()))
    rerun = calls[2:]  # every method but FACE (kept), the failed DPC included
    assert sorted(rerun) == sorted(("adult", m) for m in rt.METHODS if m != "FACE")
    study = pd.read_csv(tmp_path / "release_threat.csv")
    assert len(study) == 2 * len(rt.METHODS) and not study.note.astype(str).str.startswith("failed").any()
    assert [r.method for r in rows[:2]] == ["FACE", "FACE"] and rows[0].exact_copies == 3
    assert (tmp_path / "mst_attack.csv").read_text() == "epsilon,attack\n1,golob-mst\n"
