"""audit --threats: CCA's clamped loss, the batched surrogates, the extraction curve, label-only HopSkipJump
(closed form on a linear model; cross-checked against ART where installed), attribute inference, and the
audit's outputs and refusals (issue 25)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from recourse_privacy.attacks.cca import TransferSet, cca_loss, fit_surrogates
from recourse_privacy.attacks.label_only import LabelOnlyOptions, boundary_distance
from recourse_privacy.attacks.query_extraction import ApiAnswers, NegatedModel, extraction_curve
from recourse_privacy.attacks.threat_report import ThreatReport
from recourse_privacy.audit import AuditConfig, run_audit
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models.logistic import LogisticModel


def _linear(d=6, seed=0):
    rng = np.random.default_rng(seed)
    w, b = rng.normal(size=d), 0.2
    return w, b, (lambda Z: (np.asarray(Z) @ w + b >= 0).astype(np.int64))


def test_cca_loss_is_the_divergence_from_the_threshold_clamped_on_the_right_side():
    torch = pytest.importorskip("torch")
    z = torch.tensor([-3.0, -0.5, 0.0, 0.5, 3.0], dtype=torch.float64)
    y = torch.ones(5, dtype=torch.float64)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(z, y, reduction="none")
    clamped = cca_loss(z, y, torch.ones(5, dtype=torch.bool))
    assert torch.allclose(cca_loss(z, y, torch.zeros(5, dtype=torch.bool)), bce)
    # below the threshold: Dissanayake and Dutta's KL(0.5 || p) = 0.5 log(0.5 / p) + 0.5 log(0.5 / (1 - p))
    p = torch.sigmoid(z[:2])
    assert torch.allclose(clamped[:2], 0.5 * torch.log(0.5 / p) + 0.5 * torch.log(0.5 / (1 - p)))
    assert torch.all(clamped[:2] > 0) and clamped[0] > clamped[1]
    # at and beyond the threshold: 0
    assert torch.all(clamped[2:] == 0)
    # for a counterfactual of class 0 the clamp works on the other side, with the same divergence
    neg = cca_loss(-z, torch.zeros(5, dtype=torch.float64), torch.ones(5, dtype=torch.bool))
    assert torch.allclose(neg, clamped)


def test_batched_surrogates_learn_each_their_own_set():
    w, b, f = _linear()
    rng = np.random.default_rng(1)
    sets = []
    for k in range(3):
        X = rng.normal(size=(200, 6)) * 3 + 5  # off-centre, scaled: the folded standardisation must hold
        y = f(X - 5) if k != 1 else 1 - f(X - 5)  # the middle one learns the negation
        sets.append(TransferSet(X, y, np.zeros(len(y), bool)))
    s = fit_surrogates(sets, epochs=200, random_state=0)
    Xt = rng.normal(size=(500, 6)) * 3 + 5
    pred = s.predict(Xt)
    assert pred.shape == (3, 500)
    assert (pred[0] == f(Xt - 5)).mean() > 0.93
    assert (pred[1] == 1 - f(Xt - 5)).mean() > 0.93
    np.testing.assert_allclose(s.predict_proba(Xt, 2)[:, 1] >= 0.5, pred[2] == 1)


def _linear_api(model):
    """The adversary's view of the linear model with exact closest recourse, both ways (NegatedModel)."""
    from recourse_privacy.recourse.linear import LinearRecourse

    method = LinearRecourse()

    def answer(X, dual):
        d = model.predict(X)

        def toward(Z, side):
            out, ok = Z.copy(), np.zeros(len(Z), bool)
            for s, m in ((1, model), (0, NegatedModel(model))):
                rows = np.flatnonzero(side == s)
                if len(rows):
                    r = method.generate(m, Z[rows])
                    out[rows], ok[rows] = r.counterfactuals, r.valid
            return out, ok

        cf, ok = toward(X, 1 - d)
        ccf, ccf_ok = toward(cf, d) if dual else (None, None)
        return ApiAnswers(X, d, cf, ok, ccf, ccf_ok)

    return answer


def test_negated_model_recourse_crosses_toward_the_unfavourable_class():
    from recourse_privacy.recourse.linear import LinearRecourse

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    model = LogisticModel().fit(X, y)
    accepted = X[model.predict(X) == 1][:20]
    res = LinearRecourse().generate(NegatedModel(model), accepted)
    assert res.valid.all() and (model.predict(res.counterfactuals) == 0).all()


def test_extraction_curve_rows_intervals_and_query_caps():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(900, 5))
    y = (X[:, 0] - X[:, 2] + 0.3 > 0).astype(int)
    model = LogisticModel().fit(X[:300], y[:300])
    pool = X[300:700]
    answer = _linear_api(model)
    curve, proba = extraction_curve(
        lambda rows, dual: answer(pool[rows], dual),
        len(pool),
        model.predict,
        X[700:],
        y[700:],
        X_domain=rng.uniform(-4, 4, size=(300, 5)),
        budgets=(10, 40),
        repeats=3,
        epochs=150,
        random_state=0,
    )
    assert {p.attack for p in curve.points} == {"base", "cf", "dualcf", "cca"}
    assert curve.budgets == (10, 40)
    for p in curve.points:
        assert 0 <= p.fidelity_low <= p.fidelity <= p.fidelity_high <= 1
        assert p.n_repeats == 3 and p.domain_fidelity == p.domain_fidelity
    # counterfactuals are worth more than labels at a small budget (Aivodji et al. 2020)
    at10 = {p.attack: p.fidelity for p in curve.points if p.queries == 10}
    assert max(at10["cf"], at10["cca"], at10["dualcf"]) > at10["base"]
    assert curve.queries_for(0.0) == 10 and curve.queries_for(1.01) is None
    assert "after 40 queries a copy" in curve.sentence()
    assert proba(X[700:710]).shape == (10, 2)
    again = ThreatReport(("membership", "extraction"), curve)
    assert ThreatReport.from_dict(json.loads(json.dumps(again.to_dict()))).extraction == curve


def test_domain_samples_without_a_domain_keep_each_columns_values():
    from recourse_privacy.audit.threats import domain_sample
    from recourse_privacy.data import Dataset, Preprocessor

    df = _frame()
    X = df.drop(columns="approved")
    data = Dataset("frame", X, df["approved"].to_numpy(), "approved", categorical=("group",))
    pre = Preprocessor(corr_threshold=None).fit(X, data)
    adversary = X.iloc[:200]
    enc, note = domain_sample(data, pre, 500, 0, adversary)
    assert enc.shape == (500, pre.n_features_out_) and "declares no public domain" in note
    back = pre.inverse_transform(enc)
    back[["income", "age"]] = back[["income", "age"]].round(6)  # the scaling's round trip
    for c in X.columns:  # every value is one of the adversary's, column by column
        assert set(back[c]) <= set(adversary[c])
    rows = set(map(tuple, adversary.to_numpy()))
    assert sum(tuple(r) not in rows for r in back.to_numpy()) > 400  # combinations the rows never had
    again, _ = domain_sample(data, pre, 500, 0, adversary)
    np.testing.assert_array_equal(enc, again)  # seeded


def test_label_only_distance_matches_the_closed_form_on_a_linear_model():
    w, b, f = _linear(d=8)
    X = np.random.default_rng(4).normal(size=(200, 8))
    est = boundary_distance(f, X, random_state=0)
    true = np.abs(X @ w + b) / np.linalg.norm(w)
    assert est.queries_per_target == LabelOnlyOptions().queries_per_target
    assert spearmanr(est.distance, true)[0] > 0.97
    assert np.median(est.distance / true) < 1.3 and (est.distance >= true * (1 - 1e-6)).all()
    qs = sorted(est.by_queries)
    assert qs[-1] == est.queries_per_target
    assert all((est.by_queries[a] >= est.by_queries[c] - 1e-12).all() for a, c in zip(qs, qs[1:]))


def test_label_only_agrees_with_art_hopskipjump():
    """Cross-check with ART's HopSkipJump, the distance its LabelOnlyDecisionBoundary thresholds."""
    pytest.importorskip("art", reason="adversarial-robustness-toolbox is not installed (pip install .[crosscheck])")
    from art.attacks.evasion import HopSkipJump
    from art.estimators.classification import SklearnClassifier

    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] - X[:, 3] > 0).astype(int)
    clf = LogisticRegression().fit(X, y)
    T = X[:40].astype(np.float32)
    art_clf = SklearnClassifier(clf, clip_values=(-10.0, 10.0))
    hsj = HopSkipJump(art_clf, targeted=False, norm=2, max_iter=20, max_eval=500, init_eval=50, verbose=False)
    x_adv = hsj.generate(T)
    d_art = np.linalg.norm(x_adv - T, axis=1)
    ours = boundary_distance(clf.predict, T.astype(np.float64), random_state=0).distance
    rho = spearmanr(ours, d_art)[0]
    assert rho >= 0.9, rho


def _frame(n=700, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "income": rng.normal(50, 15, n).round(1),
            "age": rng.integers(20, 70, n).astype(float),
            "group": rng.choice(["a", "b"], n, p=[0.7, 0.3]),
        }
    )
    z = (df.income - 50) / 15 + 0.9 * (df.group == "a") + rng.normal(0, 0.7, n)
    df["approved"] = (z > 0.3).astype(int)
    return df


def test_audit_threats_all_on_a_user_pipeline(tmp_path):
    df = _frame()
    pipe = make_pipeline(
        ColumnTransformer(
            [("c", OneHotEncoder(handle_unknown="ignore"), ["group"]), ("n", StandardScaler(), ["income", "age"])]
        ),
        LogisticRegression(),
    ).fit(df.drop(columns="approved"), df["approved"])
    r = run_audit(
        model=pipe,
        data=df,
        target="approved",
        recourse="gs",
        n_members=150,
        n_adversary=300,
        attacks=("cfd", "loss", "label-only", "random"),
        threats=("all",),
        sensitive="group",
        query_budgets=(20, 60),
        extraction_repeats=2,
        out_dir=tmp_path,
        cache="off",
    )
    t = r.threats
    assert t.threats == ("membership", "extraction", "attribute", "release")
    assert len(t.extraction.points) == 8
    # a DataFrame declares no public domain: the domain samples draw each column from the adversary's rows
    assert all(0 <= p.domain_fidelity <= 1 for p in t.extraction.points)
    assert any("declares no public domain" in n for n in t.notes)
    assert t.attribute.column == "group" and set(t.attribute.values) == {"a", "b"}
    assert t.attribute.prior_low <= t.attribute.prior_accuracy <= t.attribute.prior_high
    assert any(p.access == "decisions" for p in t.queries) and t.recourse_over_labels()
    csv = pd.read_csv(tmp_path / "extraction.csv")
    assert list(csv.columns[:6]) == ["attack", "queries", "fidelity", "fidelity_low", "fidelity_high", "accuracy"]
    for f in ("extraction.png", "queries.png"):
        assert (tmp_path / f).stat().st_size > 0
    html = (tmp_path / "report.html").read_text()
    assert "agrees with your model on" in html and "Attribute inference" in html
    d = json.loads((tmp_path / "metrics.json").read_text())
    assert d["threats"]["extraction"]["queries_for_90"] in (None, 20, 60)
    from recourse_privacy.audit.result import AuditResult

    assert AuditResult.from_dict(d).threats.attribute == t.attribute


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"threats": ("steal",)}, "unknown threat"),
        ({"threats": ()}, "--threats is empty"),
        ({"threats": ("attribute",)}, "needs --sensitive"),
        ({"sensitive": "x0"}, "applies to the attribute and release threats"),
        ({"threats": ("extraction",), "query_budgets": (0,)}, "query budget"),
        ({"threats": ("extraction",), "query_budgets": ()}, "--query-budgets is empty"),
        ({"threats": ("extraction",), "query_budgets": (10, 5000)}, "raise --n-adversary"),
        ({"threats": ("extraction",), "extraction_repeats": 0}, "extraction_repeats"),
    ],
)
def test_threat_options_are_refused_before_work(overrides, match):
    with pytest.raises(InvalidInputError, match=match):
        AuditConfig(n_members=200, n_features=5, **overrides).validate()


def test_sensitive_column_checked_before_the_model_trains(monkeypatch):
    import recourse_privacy.audit.stages as stages

    monkeypatch.setattr(stages, "train_owner", lambda *a, **k: pytest.fail("trained before the check"))
    with pytest.raises(InvalidInputError, match="not a feature"):
        run_audit(
            n_members=200, n_features=5, threats=("attribute",), sensitive="nope", query_budgets=(20,), cache="off"
        )
    with pytest.raises(InvalidInputError, match=r"takes \d+ values"):
        run_audit(n_members=200, n_features=5, threats=("attribute",), sensitive="x0", query_budgets=(20,), cache="off")


def test_cli_threat_options_exit_2(tmp_path):
    from typer.testing import CliRunner

    from recourse_privacy.cli import app

    runner = CliRunner()
    for args, text in (
        (["--query-budgets", "20"], "applies to the extraction"),
        (["--threats", "extraction", "--query-budgets", "20,x"], "--query-budgets expects"),
        (["--threats", "nope"], "unknown threat"),
    ):
        res = runner.invoke(app, ["audit", "--out", str(tmp_path / "o"), *args])
        assert res.exit_code == 2, res.output
        assert text in res.output
