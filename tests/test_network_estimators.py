"""A deployed PyTorch network in a scikit-learn pipeline (skorch): batched scoring, gradients, the audit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

skorch = pytest.importorskip("skorch")
import torch  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler  # noqa: E402
from torch import nn  # noqa: E402

import recourse_privacy.models.network_estimators as network_estimators  # noqa: E402
from recourse_privacy import run_audit  # noqa: E402
from recourse_privacy.data import Preprocessor  # noqa: E402
from recourse_privacy.errors import IncompatibleError  # noqa: E402
from recourse_privacy.models.estimator import EstimatorModel  # noqa: E402
from recourse_privacy.models.network_estimators import find_network  # noqa: E402

REGIONS = ["north", "south", "east", "west", "centre"]
NUMERIC = ["income", "debt", "age"]


def applicants(n: int = 600, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "income": rng.normal(50.0, 15.0, n).round(1),
            "debt": rng.gamma(2.0, 5.0, n).round(1),
            "age": rng.integers(20, 70, n).astype(float),
            "region": rng.choice(REGIONS, n),
        }
    )
    z = (df.income - 50) / 15 - (df.debt - 10) / 7 + 0.6 * (df.region == "north")
    df["approved"] = (z + rng.normal(0, 0.8, n) > 0).astype("int64")
    return df


class Net(nn.Module):
    def __init__(self, d: int = 8, hidden: int = 32, out: int = 2):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, out))

    def forward(self, X):
        return self.layers(X)


def to_float32(a):
    return np.asarray(a, dtype=np.float32)


def network_pipeline(binary: bool = False, numeric_step=None, epochs: int = 8) -> Pipeline:
    """One-hot + scaling (or ``numeric_step``), float32, then a skorch net (softmax or one sigmoid output)."""
    encode = ColumnTransformer(
        [
            ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), ["region"]),
            ("num", numeric_step if numeric_step is not None else StandardScaler(), NUMERIC),
        ]
    )
    common = dict(max_epochs=epochs, lr=0.01, optimizer=torch.optim.Adam, batch_size=64, train_split=None, verbose=0)
    if binary:
        net = skorch.NeuralNetBinaryClassifier(Net, module__out=1, **common)
    else:
        net = skorch.NeuralNetClassifier(Net, criterion=nn.CrossEntropyLoss, **common)
    return Pipeline([("encode", encode), ("float32", FunctionTransformer(to_float32)), ("net", net)])


def fitted(df: pd.DataFrame, **kw) -> Pipeline:
    torch.manual_seed(0)
    pipe = network_pipeline(**kw).set_params(net__module__d=df.region.nunique() + len(NUMERIC))
    if kw.get("binary"):  # NeuralNetBinaryClassifier wants float targets
        return pipe.fit(df.drop(columns="approved"), df.approved.astype(np.float32))
    return pipe.fit(df.drop(columns="approved"), df.approved)


def wrapped(pipe: Pipeline, df: pd.DataFrame) -> tuple[EstimatorModel, np.ndarray]:
    X = df.drop(columns="approved")
    pre = Preprocessor(corr_threshold=None).fit(X)  # text columns are categorical
    model = EstimatorModel(pipe, pre, labels=(1, 0), feature_names=tuple(X.columns), estimator_=pipe)
    return model, pre.transform(X)


def pipeline_logit(pipe: Pipeline, model: EstimatorModel, X: np.ndarray) -> np.ndarray:
    """The deployed pipeline's own favourable log-odds at encoded points, through its predict_proba."""
    p = np.asarray(pipe.predict_proba(model.decode(X)), dtype=np.float64)[:, 1]
    return np.log(p) - np.log1p(-p)


@pytest.fixture(scope="module")
def data():
    return applicants()


@pytest.mark.parametrize("binary", [False, True])
def test_batched_scoring_is_predict_proba(data, binary, monkeypatch):
    pipe = fitted(data, binary=binary)
    parts = find_network(pipe)
    assert parts is not None and parts.net is pipe.named_steps["net"]
    rows = data.drop(columns="approved")
    expected = pipe.predict_proba(rows)
    np.testing.assert_allclose(parts.proba(rows), expected, rtol=1e-6, atol=1e-7)
    monkeypatch.setattr(network_estimators, "CHUNK_ROWS", 37)  # chunks that split the rows unevenly
    np.testing.assert_allclose(parts.proba(rows), expected, rtol=1e-6, atol=1e-7)
    assert parts.matches(pipe, rows)


def test_the_audit_model_scores_through_the_batches_not_skorchs_loader(data, monkeypatch):
    pipe = fitted(data)
    model, X = wrapped(pipe, data)
    expected = pipe.predict_proba(model.decode(X))[:, 1]
    calls = []
    original = skorch.NeuralNet.forward_iter

    def counted(self, *a, **k):
        calls.append(1)
        return original(self, *a, **k)

    monkeypatch.setattr(skorch.NeuralNet, "forward_iter", counted)
    z = model.decision_function(X)
    np.testing.assert_allclose(1 / (1 + np.exp(-z)), expected, rtol=1e-6, atol=1e-7)
    assert len(calls) == 1  # skorch's own path ran once, for the check on the first 64 rows
    model.decision_function(X[::-1])
    assert len(calls) == 1


class Tempered(skorch.NeuralNetClassifier):
    """A net whose predict_proba is not its module's softmax: the batches must not stand in for it."""

    def predict_proba(self, X):
        p = super().predict_proba(X) ** 2
        return p / p.sum(axis=1, keepdims=True)


def test_a_net_whose_predict_proba_differs_keeps_its_own(data):
    pipe = network_pipeline()
    pipe.steps[-1] = ("net", Tempered(Net, criterion=nn.CrossEntropyLoss, max_epochs=5, train_split=None, verbose=0))
    torch.manual_seed(0)
    pipe.fit(data.drop(columns="approved"), data.approved)
    model, X = wrapped(pipe, data)
    z = model.decision_function(X)
    assert model.network_ is None
    np.testing.assert_allclose(1 / (1 + np.exp(-z)), pipe.predict_proba(model.decode(X))[:, 1], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("binary", [False, True])
def test_affine_steps_give_the_network_gradients(data, binary):
    pipe = fitted(data, binary=binary)
    net = pipe.named_steps["net"].module_
    before = [(p.detach().clone(), p.requires_grad) for p in net.parameters()]
    model, X = wrapped(pipe, data)
    assert model.probe_linearity(X) and model.is_differentiable and not model.is_linear
    module = model.torch_module()
    with torch.no_grad():
        z = module(torch.as_tensor(X)).double().numpy()
    np.testing.assert_array_equal(model.decision_function(X), z)  # the model scores through the composed net
    # which is the deployed pipeline at every valid point (probabilities: a float32 net's resolution)
    np.testing.assert_allclose(1 / (1 + np.exp(-z)), pipe.predict_proba(model.decode(X))[:, 1], rtol=0, atol=1e-5)
    # its gradient along each numeric coordinate is the pipeline's own central difference, on rows whose float32
    # probability resolves the logit (0.02 < p < 0.98: an error of 3e-6 in it); a step of 2h crosses a ReLU's kink
    # in a few rows (the net is piecewise linear)
    Xs = X[np.abs(z) < np.log(0.98 / 0.02)][:200]
    zt = torch.as_tensor(Xs).clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(module(zt).sum(), zt)
    numeric = [i for i, s in enumerate(model.preprocessor.feature_sources_) if s in NUMERIC]
    h = 1e-2
    for j in numeric:
        up, down = Xs.copy(), Xs.copy()
        up[:, j] += h
        down[:, j] -= h
        fd = (pipeline_logit(pipe, model, up) - pipeline_logit(pipe, model, down)) / (2 * h)
        close = np.isclose(grad[:, j].numpy(), fd, rtol=1e-2, atol=1e-3)
        assert close.mean() > 0.9, (j, close.mean())
    # the user's network is untouched: same weights, same requires_grad
    for (w, rg), p in zip(before, net.parameters(), strict=True):
        assert torch.equal(w, p.detach()) and p.requires_grad == rg


@pytest.mark.parametrize("method", ["scfe", "revise", "cadex"])
def test_gradient_methods_search_the_deployed_network(data, method):
    from recourse_privacy.recourse import ActionSet, make_recourse

    pipe = fitted(data)
    model, X = wrapped(pipe, data)
    assert model.probe_network(X)
    rejected = X[model.decision_function(X) < 0][:60]
    # as the audit does for a user's data: one category per one-hot group (a point between two levels decodes to one)
    searcher = make_recourse(method, action_set=ActionSet.from_preprocessor(model.preprocessor, actionable=True))
    if callable(getattr(searcher, "fit", None)):  # REVISE's autoencoder
        searcher.fit(X)
    r = searcher.generate(model, rejected)
    assert r.valid.mean() > 0.9
    accepted = pipe.predict(model.decode(r.counterfactuals[r.valid]))  # the deployed pipeline's own decision
    assert (accepted == 1).mean() > 0.9


@pytest.mark.parametrize("step", [FunctionTransformer(np.cbrt), FunctionTransformer(np.square)])
def test_non_affine_steps_leave_the_network_black_box(data, step):
    pipe = fitted(data, numeric_step=step)
    model, X = wrapped(pipe, data)
    assert not model.probe_linearity(X) and not model.is_differentiable
    with pytest.raises(IncompatibleError, match="not linear"):
        model.torch_module()
    # the batches still score it
    np.testing.assert_allclose(
        1 / (1 + np.exp(-model.decision_function(X))),
        pipe.predict_proba(model.decode(X))[:, 1],
        rtol=1e-6,
        atol=1e-7,
    )


def test_an_affine_map_needs_finite_features():
    """Steps that leave their domain on a probe point (log of a negative value) give NaN: no map, not a NaN fit."""

    class Parts:
        def features(self, rows):
            return np.log(rows)

    P = np.random.default_rng(0).normal(size=(40, 3))
    with np.errstate(invalid="ignore"):
        assert network_estimators.affine_map(Parts(), lambda z: z, P) is None
        assert network_estimators.affine_map(Parts(), lambda z: np.exp(z), P) is not None  # log(exp(z)) = z


def test_a_rare_category_is_probed(data):
    """A category absent from the probed rows still gets its column of the map (the probe cycles categories)."""
    df = data.copy()
    df.loc[df.index[:3], "region"] = "islands"  # three rows of a sixth category
    pipe = fitted(df)
    model, X = wrapped(pipe, df)
    assert model.probe_network(X[3:]) and model.is_differentiable  # the probe's rows hold no "islands"
    z = model.decision_function(X[:3])
    np.testing.assert_allclose(1 / (1 + np.exp(-z)), pipe.predict_proba(model.decode(X[:3]))[:, 1], rtol=0, atol=1e-5)


def test_a_cached_network_model_reads_back_with_its_gradients(data):
    from recourse_privacy.models.estimator_state import export_estimator, restore_estimator

    pipe = fitted(data)
    model, X = wrapped(pipe, data)
    assert model.probe_network(X)
    state = export_estimator(model)
    assert {"network_A", "network_b"} <= set(state)
    # the audit's reference model: the recipe (the user's object) not yet fitted, then read back from the cache
    again = EstimatorModel(pipe, model.preprocessor, labels=(1, 0), feature_names=model.feature_names)
    restore_estimator(again, state)
    assert again.is_differentiable and not again.is_linear
    np.testing.assert_allclose(again.decision_function(X), model.decision_function(X), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("recourse", ["scfe", "gs"])
def test_deployed_network_audit(data, recourse):
    """The as-deployed audit of a skorch pipeline: gradient and black-box recourse, valid for the deployed net."""
    rng = np.random.default_rng(1)
    mask = rng.random(len(data)) < 0.5
    pipe = fitted(data[mask])
    r = run_audit(
        model=pipe,
        data=data,
        members=mask,
        target="approved",
        recourse=recourse,
        attacks=("cfd", "cfd-lrt", "loss"),
        shadow_models=2,
        cache="off",
    )
    assert r.question == "this deployed model"
    cf = r.arrays.counterfactuals
    valid = cf["valid"].to_numpy(bool)
    assert valid.mean() > 0.9
    after = cf.loc[valid, [f"{c}_cf" for c in ("income", "debt", "age", "region")]]
    after.columns = ["income", "debt", "age", "region"]
    assert (pipe.predict(after) == 1).mean() > 0.99  # the deployed net accepts its recourse
    for attack in ("cfd", "cfd-lrt", "loss"):
        assert 0.0 <= r.attacks[attack].auc <= 1.0


def test_cli_audits_a_deployed_network_from_a_skops_file(data, tmp_path):
    """The analyst's journey: the pipeline in a .skops file, the refusal's own --trust list pasted back, SCFE."""
    import json
    import re

    import skops.io as sio
    from typer.testing import CliRunner

    from recourse_privacy.cli import app

    mask = np.random.default_rng(2).random(len(data)) < 0.5
    sio.dump(fitted(data[mask]), tmp_path / "net.skops")
    data.assign(in_train=mask.astype(int)).to_csv(tmp_path / "d.csv", index=False)
    common = ["audit", "--data", str(tmp_path / "d.csv"), "--target", "approved", "--positive-label", "1"]
    common += ["--members", "in_train", "--model-file", str(tmp_path / "net.skops"), "--recourse", "scfe"]
    common += ["--attacks", "cfd,loss", "--shadow-models", "2", "--cache-dir", "off", "--out", str(tmp_path / "o")]
    refused = CliRunner().invoke(app, common, env={"COLUMNS": "400"})
    assert refused.exit_code != 0
    types = re.search(r"pass --trust (\S+) \(Python", " ".join(refused.output.split())).group(1)
    assert "skorch.classifier.NeuralNetClassifier" in types.split(",")
    res = CliRunner().invoke(app, [*common, "--trust", types])
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert metrics["question"] == "this deployed model" and metrics["recourse"]["validity"] > 0.9


def test_refitting_the_recipe_is_seeded(data):
    """The recipe question trains fresh nets: the same seed gives the same network, another seed another one."""
    X = data.drop(columns="approved")
    pre = Preprocessor(corr_threshold=None).fit(X)
    Z, y = pre.transform(X), data.approved.to_numpy()
    recipe = fitted(data, epochs=3)  # the user's fitted object is the recipe; the audit trains clones of it

    def trained(seed: int, before: int) -> np.ndarray:
        torch.manual_seed(before)  # the global generator's state before the fit must not matter
        model = EstimatorModel(recipe, pre, labels=(1, 0), feature_names=tuple(X.columns), random_state=seed)
        return model.fit(Z, y).decision_function(Z)

    np.testing.assert_array_equal(trained(7, before=1), trained(7, before=2))
    assert not np.allclose(trained(7, before=1), trained(8, before=1))


def test_the_recipe_question_trains_an_unfitted_network_pipeline_reproducibly(data):
    """An unfitted pipeline (its ColumnTransformer selects columns by name) is the recipe: fresh seeded networks,
    gradient recourse through them, and the same numbers twice."""
    recipe = network_pipeline(epochs=5).set_params(net__module__d=len(REGIONS) + len(NUMERIC))
    kw = dict(target="approved", recourse="scfe", attacks=("cfd", "cfd-lrt"), shadow_models=2, n_members=150)
    first = run_audit(model=recipe, data=data, cache="off", **kw)
    again = run_audit(model=recipe, data=data, cache="off", **kw)
    assert first.question == "this recipe, re-trained" and first.recourse.validity > 0.9
    for name in ("cfd", "cfd-lrt"):
        np.testing.assert_array_equal(first.scores[name].scores, again.scores[name].scores)


def to_float32_sparse(a):
    return a.astype(np.float32)


def test_steps_giving_a_sparse_matrix_keep_skorchs_own_path(data):
    """A sparse encoding (skorch feeds the net a sparse tensor): no batches, no gradients, the pipeline's numbers."""
    encode = ColumnTransformer(
        [("cat", OneHotEncoder(handle_unknown="ignore"), ["region"]), ("num", StandardScaler(), NUMERIC)],
        sparse_threshold=1.0,
    )
    net = skorch.NeuralNetClassifier(
        Net, module__d=len(REGIONS) + len(NUMERIC), criterion=nn.CrossEntropyLoss, max_epochs=3, train_split=None,
        verbose=0,
    )  # fmt: skip
    sparse_cast = FunctionTransformer(to_float32_sparse, accept_sparse=True)
    pipe = Pipeline([("encode", encode), ("float32", sparse_cast), ("net", net)])
    torch.manual_seed(0)
    pipe.fit(data.drop(columns="approved"), data.approved)
    model, X = wrapped(pipe, data)
    assert not model.probe_linearity(X) and not model.is_differentiable
    z = model.decision_function(X)
    assert model.network_ is None  # the batches did not reproduce it: skorch's own predict_proba from here on
    np.testing.assert_allclose(1 / (1 + np.exp(-z)), pipe.predict_proba(model.decode(X))[:, 1], rtol=1e-9, atol=1e-12)


def test_a_binary_nets_own_threshold_is_its_decision_with_gradients(data):
    """NeuralNetBinaryClassifier(threshold=0.7): the composed network decides as the pipeline's predict does."""
    pipe = network_pipeline(binary=True).set_params(net__threshold=0.7, net__module__d=len(REGIONS) + len(NUMERIC))
    torch.manual_seed(0)
    pipe.fit(data.drop(columns="approved"), data.approved.astype(np.float32))
    model, X = wrapped(pipe, data)
    assert model.threshold_.value == pytest.approx(0.7) and "NeuralNetBinaryClassifier" in model.threshold_.source
    assert model.probe_network(X) and model.is_differentiable
    p = pipe.predict_proba(model.decode(X))[:, 1]
    far = np.abs(p - 0.7) > 1e-5
    assert ((p > 0.5) & (p < 0.7)).sum() > 10
    np.testing.assert_array_equal(model.predict(X)[far], pipe.predict(model.decode(X))[far])
    model.check_decisions(X)
    x = torch.as_tensor(X[:5])  # the module the gradient methods search: the decision logit, 0 at the cutoff
    with torch.no_grad():
        z = model.torch_module()(x).double().numpy()
    np.testing.assert_allclose(z, pipeline_logit(pipe, model, X[:5]) - np.log(0.7 / 0.3), atol=1e-4)
