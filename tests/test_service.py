"""The service's pieces without a server: publish and its bundle, the schema, the key file, the ledger, the CLI."""

from __future__ import annotations

import json
import multiprocessing as mp
import re
import threading

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from _service_util import BOUNDS, applicant, publish_each, tiny_dataset
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.service.bundle import METHODS, load_bundle, load_dpc_explainer, publish
from recourse_privacy.service.keys import KeyStore, hash_key
from recourse_privacy.service.ledger import Account, GroupCommitter, Refusal, SpendRequest, open_ledger
from recourse_privacy.service.schema import ApplicantError

pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    ds = tiny_dataset()
    return ds, publish_each(ds, tmp_path_factory, "", epsilon=1.0)


def cli(*args: str, check: bool = True):
    """``recourse-privacy ARGS`` in this process (typer's runner): ``.returncode``, ``.stdout``, ``.stderr``."""
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from recourse_privacy.cli import app

    res = CliRunner().invoke(app, list(args))
    out = SimpleNamespace(returncode=res.exit_code, stdout=res.stdout, stderr=res.stderr)
    if check and res.exit_code != 0:
        raise AssertionError(
            f"recourse-privacy {' '.join(args)} exited {res.exit_code}: {res.output} {res.exception!r}"
        )
    return out


def _numbers(obj):
    """Every number in a JSON document."""
    if isinstance(obj, bool):
        return
    if isinstance(obj, int | float):
        yield float(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)


@pytest.mark.parametrize("method", METHODS)
def test_bundle_holds_no_training_row(bundles, method):
    ds, paths = bundles
    path = paths[method]
    names = sorted(p.name for p in path.iterdir())
    assert all(n.endswith((".json", ".npz")) for n in names), names  # no pickle, no skops of training data
    b = load_bundle(path)
    Z = b.schema.encode_frame(ds.X)
    raw = ds.X[["age", "hours", "income"]].to_numpy(float)
    for npz in path.glob("*.npz"):
        with np.load(npz, allow_pickle=False) as z:
            for key in z.files:
                arr = np.atleast_2d(np.asarray(z[key], float))
                for space in (Z, raw):
                    if arr.shape[1] == space.shape[1]:
                        # no stored row equals a training row (in the model space or the original units)
                        d = np.abs(arr[:, None, :] - space[None, :, :]).max(axis=2)
                        assert d.min() > 1e-9, f"{npz.name}[{key}] holds a training row"
    # the JSON files hold no training row either: no document holds a row's three numeric values together
    numbers = set()
    for js in path.glob("*.json"):
        numbers |= set(_numbers(json.loads(js.read_text())))
    hits = [r for r in raw if {r[0], r[1], r[2]} <= numbers]
    assert not hits, hits[:3]


def test_manifest_states_method_guarantee_and_schema(bundles):
    _, paths = bundles
    for method, path in paths.items():
        man = json.loads((path / "manifest.json").read_text())
        assert man["method"] == method and man["epsilon"] == 1.0 and man["delta"] == 0.0
        assert man["epsilon_per_answer"] == (1.0 if method == "laplace" else 0.0)
        assert man["guarantee"]["covers"] and man["guarantee"]["does_not_cover"]
        assert re.fullmatch(r"[0-9a-f]{64}", man["model"]["sha256"]) and man["recourse_privacy_version"]
        feats = {f["name"]: f for f in man["features"]}
        assert list(feats) == ["age", "hours", "income", "job", "sex"]
        assert feats["hours"] | {} == {"name": "hours", "type": "numeric", "categories": None, "lower": 0.0,
                                       "upper": 100.0, "immutable": False, "direction": "any", "integer": True}  # fmt: skip
        assert feats["age"]["direction"] == "increase" and feats["sex"]["immutable"]
        assert feats["job"]["categories"] == ["clerk", "manager", "worker"]
        assert set(man["schema_notes"]["read_from_data"]) == {"job", "sex"}
    laplace = json.loads((paths["laplace"] / "manifest.json").read_text())["guarantee"]["does_not_cover"]
    assert any("weights" in line for line in laplace)  # the non-private direction is stated


@pytest.mark.parametrize("method", METHODS)
def test_answers_respect_the_schema(bundles, method):
    _, paths = bundles
    b = load_bundle(paths[method], random_state=0)
    rows = [b.schema.parse(applicant(hours=h, age=25 + h % 40)) for h in range(0, 100, 5)]
    answers = b.answer(rows)
    assert len(answers) == len(rows)
    for row, a in zip(rows, answers):
        assert a["decision"] in ("accepted", "rejected")
        cf = a["counterfactual"]
        if cf is None:
            continue
        assert cf["sex"] == "F" and cf["age"] >= row[0]  # immutable kept, increase-only never lowered
        assert 0 <= cf["hours"] <= 100 and cf["hours"] == int(cf["hours"])
        assert [c["feature"] for c in a["changes"]] == a["reasons"]
        assert all(c["from"] != c["to"] for c in a["changes"]) and len(a["sentences"]) == len(a["changes"])
    if method == "dpm":  # the exact move of a DP model: every rejected applicant gets a valid counterfactual
        assert all(a["valid"] for a in answers)


@pytest.mark.parametrize("method", METHODS)
def test_answer_json_is_the_json_of_the_answers(bundles, method):
    """The text the server sends (``answer_json``, written column by column) is exactly ``json.dumps`` of the answer
    objects, accepted and rejected alike, with their decisions; two bundles loaded with one seed, so that Laplace
    draws the same noise for both."""
    _, paths = bundles
    docs = [applicant(hours=h, age=25 + h % 40, income=1.5 * h + 0.25, job=("clerk", "manager", "worker")[h % 3])
            for h in range(0, 100, 3)]  # fmt: skip
    objects = load_bundle(paths[method], random_state=7)
    texts = load_bundle(paths[method], random_state=7)
    rows = objects.schema.parse_many(docs)
    answers, sent = objects.answer(rows), texts.answer_json(rows)
    assert {a["decision"] for a in answers} == {"accepted", "rejected"}
    assert sent.texts == [json.dumps(a, separators=(",", ":"), allow_nan=False) for a in answers]
    assert sent.decisions == [a["decision"] for a in answers]


def test_answer_json_escapes_what_json_escapes(tmp_path):
    """A category with a quote, a backslash and non-ASCII letters: the text still equals ``json.dumps`` (the sentences
    then go through the encoder)."""
    ds = tiny_dataset(300)
    odd = 'cl\u00e9rk "q" \\ x'
    ds.X["job"] = ds.X["job"].replace({"clerk": odd})
    publish(ds, method="dpm", epsilon=1.0, out=tmp_path / "b", bounds=BOUNDS)
    b = load_bundle(tmp_path / "b")
    assert not b._json.plain
    rows = b.schema.parse_many([applicant(job=odd, hours=h) for h in range(0, 60, 7)])
    answers = b.answer(rows)
    assert any(a["counterfactual"] and a["counterfactual"]["job"] == odd for a in answers)
    assert b.answer_json(rows).texts == [json.dumps(a, separators=(",", ":")) for a in answers]


def test_dpm_sentences_read_as_recourse(bundles):
    b = load_bundle(bundles[1]["dpm"])
    a = b.answer([b.schema.parse(applicant())])[0]
    assert a["decision"] == "rejected" and a["valid"]
    assert any(re.fullmatch(r"raise (hours|income|age) from [\d.]+ to [\d.]+", s) for s in a["sentences"]), a


def test_load_bundle_refuses_a_corrupted_file(bundles, tmp_path):
    import shutil

    src = bundles[1]["dpm"]
    dst = tmp_path / "b"
    shutil.copytree(src, dst)
    with open(dst / "model.npz", "ab") as f:
        f.write(b"x")
    with pytest.raises(InvalidInputError, match="corrupted"):
        load_bundle(dst)
    with pytest.raises(InvalidInputError, match="not a bundle"):
        load_bundle(tmp_path)


def test_dpc_bundle_is_hardened_dpc_with_its_budget_split(bundles):
    _, paths = bundles
    man = json.loads((paths["dpc"] / "manifest.json").read_text())
    meta = json.loads((paths["dpc"] / "dpc.json").read_text())
    parts = (man["privacy"]["model"]["epsilon"], meta["epsilon_autoencoder"], meta["epsilon_prototypes"])
    assert sum(parts) == pytest.approx(man["epsilon"]) and man["epsilon_per_answer"] == 0.0
    assert meta["mode"] == "hardened" and meta["ledger"]["is_dp"] and man["privacy"]["is_dp"]
    with np.load(paths["dpc"] / "dpc.npz", allow_pickle=False) as z:
        assert z["prototypes"].shape == (2, meta["encoder_layers"][-1])
        assert z["encoder.0.weight"].shape[1] == z["decoder.2.weight"].shape[0] == meta["n_features"]


def test_dpc_answers_equal_the_explainer_searching_from_the_published_release(bundles):
    """The server's compiled search and its numpy reference equal DPC's torch explainer (autograd, torch's Adam) on
    the loaded release. All three run the same float64 operations in different orders (last-bit differences),
    which 300 Adam steps amplify far below the 1e-6 asked here."""
    import torch

    b = load_bundle(bundles[1]["dpc"])
    docs = [applicant(hours=h, income=3.0 * h, job=("clerk", "worker")[h % 2]) for h in range(0, 60, 4)]
    a = b.schema.parse_many(docs)
    Z = b.schema.encode(a)
    w, c = torch.as_tensor(b.model.coef_), b.model.intercept_
    n = len(Z)
    ex = load_dpc_explainer(bundles[1]["dpc"]).explain(
        Z, lambda x: torch.stack([torch.zeros(len(x), dtype=x.dtype), x @ w + c], 1),
        targets=np.ones(n, np.int64), predicted=np.zeros(n, np.int64),
    )  # fmt: skip
    cf, valid = b.graph.search(Z, b.model.coef_, c)
    assert np.abs(cf - ex.counterfactuals).max() < 1e-6 and np.array_equal(valid, ex.valid)
    cf_np, valid_np = b.graph.search_numpy(Z, b.model.coef_, c)
    assert np.abs(cf_np - ex.counterfactuals).max() < 1e-6 and np.array_equal(valid_np, ex.valid)
    assert 0 < valid.sum()  # the search does reach the favourable side
    answers = b.answer(a)
    rejected = b.model.predict(Z) == 0
    expected = b.schema.as_dicts(b.schema.decode(ex.counterfactuals[rejected], a.take(np.flatnonzero(rejected))))
    assert _close([x["counterfactual"] for x, r in zip(answers, rejected) if r], expected)


def test_dpc_compiled_search_in_chunks_and_padded_equals_the_numpy_search(bundles, monkeypatch):
    """Chunking and padding change nothing: 11 seeded points in chunks of 4 (the last padded from 3 to 4 with copies
    of its last row) give the numpy loop's answers, and a row alone gives its answer within the batch; from the
    unfavourable prototype too (target 0, the sign flipped)."""
    from recourse_privacy.service import latent_search

    g = load_bundle(bundles[1]["dpc"]).graph
    w = np.random.default_rng(1).normal(size=g.decoder[-1][0].shape[0])
    U = np.random.default_rng(2).random((11, len(w)))
    monkeypatch.setattr(latent_search, "CHUNK", 4)
    for target, sign in ((1, 1.0), (0, -1.0)):
        # the boundary just past the prototype's decoded point: the search starts on the wrong side and must cross
        start = latent_search._forward(g.decoder, g.prototypes[target][None])[-1][0]
        b = -float(start @ w) - 0.05 * sign
        cf, valid = g.search(U, w, b, target)
        cf_np, valid_np = g.search_numpy(U, w, b, target)
        assert np.abs(cf - cf_np).max() < 1e-6 and np.array_equal(valid, valid_np)
        assert 0 < valid.sum() and np.array_equal(valid, sign * (cf @ w + b) > 0)
        one, one_valid = g.search(U[5:6], w, b, target)
        assert np.abs(one - cf[5:6]).max() < 1e-9 and one_valid[0] == valid[5]
    assert g.search(U[:0], w, 0.0)[0].shape == (0, len(w))


def test_dpc_served_answers_are_the_same_with_the_numpy_search(bundles):
    """What an applicant receives does not depend on which implementation searched: 40 seeded applicants' answers
    (decision, changed features and their order, categories, sentences) are equal with the compiled loop and with
    the numpy loop, and every number agrees to 1e-6 of the widest public range (the searches agree to 1e-6 in the
    model space, where each numeric feature's unit is its range)."""
    import dataclasses
    from types import SimpleNamespace

    b = load_bundle(bundles[1]["dpc"])
    rng = np.random.default_rng(3)
    docs = _random_applicants(rng, 40)
    a = b.schema.parse_many(docs)
    compiled = b.answer(a)
    reference = dataclasses.replace(b, graph=SimpleNamespace(search=b.graph.search_numpy)).answer(a)
    assert sum(x["decision"] == "rejected" and x["changes"] != [] for x in compiled) >= 10
    assert _close(compiled, reference, 1e-6 * max(hi - lo for lo, hi in BOUNDS.values()))


def test_dpc_float32_search_answers_as_the_float64_one_within_float32s_drift(bundles):
    """``search_precision="float32"`` (serve --search-precision float32) runs the same loop in float32: on 300 seeded
    applicants of the tiny release, every counterfactual is valid exactly where the float64 one is, within 1e-3 of it
    in the model space (float32's unit roundoff, 6e-8, grown by 300 Adam steps: 4e-7 measured here; Adult's release
    moved 1.5% of rows by more than 0.01, docs/deployment.md), and each answer changes the same features."""
    b64 = load_bundle(bundles[1]["dpc"])
    b32 = load_bundle(bundles[1]["dpc"], search_precision="float32")
    assert (b64.graph.precision, b32.graph.precision) == ("float64", "float32")
    a = b64.schema.parse_many(_random_applicants(np.random.default_rng(7), 300))
    Z = b64.schema.encode(a)
    Zr = Z[b64.model.predict(Z) == 0]
    assert len(Zr) >= 50
    cf64, _ = b64._counterfactuals(Zr)
    cf32, _ = b32._counterfactuals(Zr)
    assert cf32.dtype == np.float64 and cf32.shape == cf64.shape
    assert 0 < np.abs(cf32 - cf64).max() < 1e-3  # not the same program, and close
    w, c = b64.model.coef_, b64.model.intercept_
    assert np.array_equal(cf32 @ w + c > 0, cf64 @ w + c > 0)
    changed = lambda answers: [sorted(x["feature"] for x in ans.get("changes") or []) for ans in answers]  # noqa: E731
    assert changed(b32.answer(a)) == changed(b64.answer(a))


def test_search_precision_is_refused_by_name_where_it_does_not_apply(bundles):
    """A precision other than float64 and float32, or float32 for a bundle that compiles no search, is one error naming
    the option before anything is served."""
    with pytest.raises(InvalidInputError, match="search_precision.*'float16'"):
        load_bundle(bundles[1]["dpc"], search_precision="float16")
    with pytest.raises(InvalidInputError, match="search_precision.*only a DPC bundle.*'privrecourse'"):
        load_bundle(bundles[1]["privrecourse"], search_precision="float32")
    out = cli("serve", str(bundles[1]["privrecourse"]), "--api-keys", "k.json", "--ledger", "l.db",
              "--search-precision", "float32", check=False)  # fmt: skip
    assert out.returncode != 0 and "only a DPC bundle" in out.stderr


def test_serve_float32_reaches_the_app_and_health_says_so(bundles, tmp_path, monkeypatch):
    """``serve --search-precision float32`` hands the precision to every worker's application (through the config of
    ``app_from_env``), and ``GET /health`` names it; the float32 server answers an applicant."""
    fastapi_testclient = pytest.importorskip("fastapi.testclient")
    uvicorn = pytest.importorskip("uvicorn")
    from recourse_privacy.service import app as app_module

    key = KeyStore(tmp_path / "keys.json").add("k", budget=1.0)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: None)  # the CLI's checks and config, without the server
    monkeypatch.setenv(app_module.CONFIG_ENV, "{}")  # the CLI sets it; the test's end restores its absence
    cli("serve", str(bundles[1]["dpc"]), "--api-keys", str(tmp_path / "keys.json"), "--ledger",
        str(tmp_path / "l.db"), "--compile-cache", "off", "--search-precision", "float32")  # fmt: skip
    client = fastapi_testclient.TestClient(app_module.app_from_env())
    assert client.get("/health").json() == {"status": "ok", "method": "dpc", "search_precision": "float32"}
    b = load_bundle(bundles[1]["dpc"])  # an applicant its DP model rejects (epsilon 1/3: it need not be the usual)
    docs = [applicant(hours=h, income=i) for h in range(0, 60, 4) for i in (0.0, 50.0, 120.0)]
    rejected = next(a for a in docs if b.model.predict(b.schema.encode([b.schema.parse(a)]))[0] == 0)
    answer = client.post("/v1/recourse", json={"applicant": rejected}, headers={"X-API-Key": key}).json()
    assert answer["decision"] == "rejected" and answer["changes"]


def test_dpc_batch_answered_in_pieces_on_the_search_threads_equals_one_pass(bundles, monkeypatch):
    """A large DPC batch is answered in pieces on the search threads (one piece's Python runs while another's compiled
    search runs): the answers equal those of one pass on the calling thread, to the 1e-6 of the compiled searches'
    agreement. Pieces of 8 rows with chunks of 4 make each piece's search chunk on its own thread (a search thread
    never waits on another: the test would hang, and is stopped after 120 s)."""
    import threading

    from recourse_privacy.service import bundle as bundle_module
    from recourse_privacy.service import latent_search

    b = load_bundle(bundles[1]["dpc"])
    rng = np.random.default_rng(5)
    docs = _random_applicants(rng, 60)  # 18 that the bundle's DP model (epsilon 1/3) rejects
    a = b.schema.parse_many(docs)
    monkeypatch.setattr(bundle_module, "_PIECE_ROWS", {})
    whole = b.answer(a)
    searched_on = []
    search = latent_search.LatentSearch.search

    def recording(self, U, *args, **kw):
        searched_on.append((threading.current_thread().name, len(U)))
        return search(self, U, *args, **kw)

    monkeypatch.setattr(latent_search.LatentSearch, "search", recording)
    monkeypatch.setattr(latent_search, "CHUNK", 4)
    monkeypatch.setattr(bundle_module, "_PIECE_ROWS", {"dpc": 8})
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("answers", b.answer(a)))
    t.start()
    t.join(120)
    assert "answers" in box, "the pieces' searches waited on each other"
    rejected = sum(x["decision"] == "rejected" for x in whole)
    assert rejected > 8 and sum(x["changes"] != [] for x in whole) >= 10
    assert len(searched_on) == -(-rejected // 8) and all(name.startswith("dpc-search") for name, _ in searched_on)
    assert all(n <= 8 for _, n in searched_on)
    assert _close(box["answers"], whole, 1e-6 * max(hi - lo for lo, hi in BOUNDS.values()))


def test_dpc_warm_compiles_the_padded_sizes_so_that_answers_compile_nothing(bundles, caplog):
    """After ``warm(2)`` (sizes 1 and 2) searching 1 or 2 rows compiles nothing, while 3 rows (padded to 4, not
    warmed) does compile: what a server does at start so that no caller waits for a compilation. The kernel is
    made anew first, so that no other test's compilations count."""
    import logging

    import jax

    from recourse_privacy.service import latent_search

    latent_search._kernel.cache_clear()
    g = load_bundle(bundles[1]["dpc"]).graph
    U = np.random.default_rng(4).random((20, g.decoder[-1][0].shape[0]))
    w = np.ones(U.shape[1])
    g.warm(2)

    def compiles(n: int) -> int:
        caplog.clear()
        with jax.log_compiles(True), caplog.at_level(logging.WARNING):
            g.search(U[:n], w, 0.0)
        return sum("Compiling" in r.getMessage() for r in caplog.records)

    assert compiles(1) == 0 and compiles(2) == 0
    assert compiles(3) >= 1


# ------------------------------------------------------------------ schema
@pytest.mark.parametrize(
    ("applicant_doc", "field"),
    [
        ([1], "applicant"),
        (applicant(extra=1), "applicant.extra"),
        ({k: v for k, v in applicant().items() if k != "hours"}, "applicant.hours"),
        (applicant(hours="20"), "applicant.hours"),
        (applicant(hours=True), "applicant.hours"),
        (applicant(hours=None), "applicant.hours"),
        (applicant(hours=101), "applicant.hours"),
        (applicant(income=-0.1), "applicant.income"),
        (applicant(hours=10**400), "applicant.hours"),
        (applicant(job="pilot"), "applicant.job"),
        (applicant(job=1), "applicant.job"),
    ],
)
def test_schema_parse_names_the_field(bundles, applicant_doc, field):
    b = load_bundle(bundles[1]["dpm"])
    with pytest.raises(ApplicantError) as err:
        b.schema.parse(applicant_doc)
    assert err.value.field == field


def _close(a, b, tol: float = 1e-9) -> bool:
    """Equal JSON documents, floats up to ``tol`` (relative or absolute; a batched matrix product may differ in the
    last bits)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and a == pytest.approx(b, rel=tol, abs=tol)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    return a == b


def test_parse_many_equals_parse_one_by_one_and_names_the_first_bad_field(bundles):
    b = load_bundle(bundles[1]["dpm"])
    docs = [applicant(hours=h, age=20 + h % 50, income=h * 1.5, job=("clerk", "manager")[h % 2]) for h in range(40)]
    batch = b.schema.parse_many(docs)
    single = b.schema.from_rows([b.schema.parse(d) for d in docs])
    assert np.array_equal(batch.num, single.num) and np.array_equal(batch.cat, single.cat)
    assert _close(b.answer(batch), [b.answer([b.schema.parse(d)])[0] for d in docs])
    for bad, field in ((dict(job="pilot"), "job"), (dict(hours=101), "hours"), (dict(extra=1), "extra")):
        wrong = [*docs[:3], applicant(**bad), applicant(hours="x")]
        with pytest.raises(ApplicantError) as err:
            b.schema.parse_many(wrong)
        assert err.value.field == f"applicants[3].{field}"
    with pytest.raises(ApplicantError) as err:
        b.schema.parse_many([applicant(hours=None)], "applicant", batch=False)
    assert err.value.field == "applicant.hours"


def test_parse_many_takes_numpy_strings_and_floats_as_parse_does(bundles):
    """``parse`` takes ``numpy.str_`` and ``numpy.float64`` (subclasses of str and float: what a row of a DataFrame
    or an array holds); ``parse_many`` gives the same arrays for them, on its column-wise path and on the one-by-one
    path (a dict subclass), and still refuses ``numpy.int64`` and ``numpy.bool_`` naming the field, as ``parse``
    does."""
    from collections import OrderedDict

    b = load_bundle(bundles[1]["dpm"])
    docs = [applicant(hours=h, age=20 + h, income=h * 1.5, job=("clerk", "manager")[h % 2]) for h in range(6)]
    as_numpy = [{k: np.str_(v) if isinstance(v, str) else np.float64(v) for k, v in d.items()} for d in docs]
    assert all(isinstance(v, np.str_ | np.float64) for d in as_numpy for v in d.values())
    expected = b.schema.from_rows([b.schema.parse(d) for d in docs])
    for given_docs in (as_numpy, [OrderedDict(d) for d in as_numpy]):
        got = b.schema.parse_many(given_docs)
        assert np.array_equal(got.num, expected.num) and np.array_equal(got.cat, expected.cat)
    assert b.schema.from_rows([b.schema.parse(d) for d in as_numpy]).num.tolist() == expected.num.tolist()
    for bad in (np.int64(30), np.bool_(True)):
        wrong = [*as_numpy[:2], {**as_numpy[2], "hours": bad}]
        with pytest.raises(ApplicantError) as err:
            b.schema.parse_many(wrong)
        assert err.value.field == "applicants[2].hours"
    with pytest.raises(ApplicantError) as err:
        b.schema.parse_many([])
    assert err.value.field == "applicants"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["age", "hours", "income", "job", "sex", "x"]), _json, max_size=6))
def test_schema_parse_raises_only_applicant_errors(doc):
    b = _FUZZ_BUNDLE.get("b")
    if b is None:
        pytest.skip("no bundle")
    try:
        one = b.schema.parse(doc)
    except ApplicantError as err:
        with pytest.raises(ApplicantError) as again:  # the column-wise batch path refuses it the same way
            b.schema.parse_many([doc], "applicant", batch=False)
        assert again.value.field == err.field
        return
    assert _close(b.answer([one]), b.answer(b.schema.parse_many([doc], "applicant", batch=False)))


_FUZZ_BUNDLE: dict = {}


@pytest.fixture(autouse=True, scope="module")
def _fuzz_bundle(bundles):
    _FUZZ_BUNDLE["b"] = load_bundle(bundles[1]["dpm"])


# ------------------------------------------------------------------ keys
def test_keys_store_only_hashes(tmp_path):
    ks = KeyStore(tmp_path / "keys.json")
    key = ks.add("alice", budget=2.0, query_cap=10)
    text = (tmp_path / "keys.json").read_text()
    assert key.startswith("rpk_") and key not in text and hash_key(key) in text
    assert ks.active()[hash_key(key)].budget == 2.0
    with pytest.raises(InvalidInputError, match="exists"):
        ks.add("alice")
    for bad in ("", "a b", "x" * 65, "-a"):
        with pytest.raises(InvalidInputError):
            ks.add(bad)
    with pytest.raises(InvalidInputError):
        ks.add("bob", budget=float("nan"))
    assert ks.revoke("alice") == 1 and ks.active() == {}
    with pytest.raises(InvalidInputError, match="no active key"):
        ks.revoke("alice")
    ks.add("alice")  # a new key under a revoked name


def test_keys_cli_prints_the_key_alone_on_the_last_line(tmp_path):
    f = tmp_path / "k.json"
    res = cli("keys", "add", "carol", "--file", str(f), "--budget", "1.5", "--query-cap", "7")
    key = res.stdout.rstrip("\n").split("\n")[-1]
    assert re.fullmatch(r"rpk_[A-Za-z0-9_-]{43}", key)
    assert key not in f.read_text() and hash_key(key) in f.read_text()
    listed = cli("keys", "list", "--file", str(f)).stdout
    assert "carol" in listed and "cap=7" in listed and key not in listed
    assert "revoked 1 key" in cli("keys", "revoke", "carol", "--file", str(f)).stdout
    assert "carol" not in cli("keys", "list", "--file", str(f)).stdout


@pytest.mark.parametrize(
    "args",
    [
        ("keys", "add", "x", "--file", "{f}", "--budget", "-1"),
        ("keys", "add", "x", "--file", "{f}", "--query-cap", "0"),
        ("keys", "add", "a b", "--file", "{f}"),
        ("keys", "revoke", "nobody", "--file", "{f}"),
        ("keys", "list", "--file", "{f}.missing"),
        ("publish", "--method", "nope", "--epsilon", "1", "--out", "{d}"),
        ("publish", "--method", "dpm", "--epsilon", "0", "--out", "{d}"),
        ("publish", "--method", "dpm", "--epsilon", "1", "--out", "{d}", "--bounds", "age=3"),
        ("publish", "--method", "dpm", "--epsilon", "1", "--out", "{d}", "--target", "y"),
        ("publish", "--method", "dpm", "--epsilon", "1", "--out", "{d}", "--model-file", "m.skops"),
        ("serve", "{d}/none", "--api-keys", "{f}", "--ledger", "{d}/l.db"),
        ("serve", "{d}", "--api-keys", "{f}", "--ledger", "{d}/l.db", "--port", "70000"),
    ],
)
def test_cli_usage_errors_exit_2_without_traceback(tmp_path, args):
    (tmp_path / "k.json").write_text("")
    res = cli(*(a.format(f=tmp_path / "k.json", d=tmp_path) for a in args), check=False)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and res.stderr.strip()


def test_cli_publish_from_a_csv(tmp_path):
    ds = tiny_dataset(300)
    csv = tmp_path / "loans.csv"
    ds.X.assign(decision=np.where(ds.y == 1, "approved", "denied")).to_csv(csv, index=False)
    out = tmp_path / "bundle"
    args = ("publish", "--method", "dpm", "--epsilon", "2", "--data", str(csv), "--target", "decision")
    args += ("--positive-label", "approved", "--immutable", "sex", "--increasing", "age", "--bounds", "age=18:90")
    args += ("--bounds", "hours=0:100", "--bounds", "income=0:250", "--out", str(out))
    res = cli(*args)
    assert json.loads(res.stdout.splitlines()[-1])["method"] == "dpm"
    feats = json.loads((out / "manifest.json").read_text())["features"]
    assert [f["name"] for f in feats] == ["age", "hours", "income", "job", "sex"]
    assert cli(*args, check=False).returncode == 2  # an existing bundle is not overwritten
    assert cli(*args, "--overwrite").returncode == 0


def test_privrecourse_bundles_publish_nodes_an_applicant_can_hold(bundles):
    """The DP k-means centres hold fractional categories (job 0.4 clerk, 0.6 manager); the bundle snaps them onto
    the schema's values before the graph and the candidates (post-processing), so each node decodes to itself and a
    candidate is accepted as an applicant would hold it (Adult at epsilon 1: 98.0% of answers valid, 31.2% without;
    docs/deployment.md)."""
    ds, paths = bundles
    b = load_bundle(paths["privrecourse"], random_state=0)
    N = b.graph.nodes
    np.testing.assert_allclose(b.schema.encode(b.schema.decode(N)), N, atol=1e-9)
    job = [j for j, name in enumerate(b.schema.model_feature_names()) if name.startswith("job")]
    assert np.isin(N[:, job], (0.0, 1.0)).all() and (N[:, job].sum(1) == 1).all()
    entries = b.manifest["privacy"]["nodes"]["entries"]
    assert any("snapped" in e["step"] and e["epsilon"] == 0.0 for e in entries)


@pytest.mark.parametrize("method", METHODS)
def test_release_check_summarises_the_answers_the_bundle_gives_a_seeded_draw_of_rejected_rows(bundles, method):
    """check_release answers min(n_rows, rejected) rows the bundle's model rejects, drawn with its seed, and reports
    the share of valid answers, of answers with no counterfactual, and the valid ones' median cost."""
    from recourse_privacy.service.release_check import check_release

    ds, paths = bundles
    check = check_release(load_bundle(paths[method], random_state=5), ds.X, n_rows=40, random_state=1)
    b = load_bundle(paths[method], random_state=5)
    a = b.schema.applicants_from_frame(ds.X)
    assert np.array_equal(b.schema.encode(a), b.schema.encode_frame(ds.X))
    rejected = np.flatnonzero(b.model.predict(b.schema.encode(a)) == 0)
    assert check.n_rejected == len(rejected) and check.n_checked == min(40, len(rejected)) > 0
    rows = np.sort(np.random.default_rng(1).choice(rejected, check.n_checked, replace=False))
    answers = b.answer(a.take(rows))
    assert all(x["decision"] == "rejected" for x in answers)
    valid = [x["valid"] for x in answers if x["counterfactual"] is not None]
    assert check.valid_share == pytest.approx(sum(valid) / len(answers))
    assert check.not_found_share == pytest.approx(1 - len(valid) / len(answers))
    costs = [x["cost"] for x in answers if x.get("valid")]
    assert check.median_cost == (pytest.approx(np.median(costs)) if costs else None)
    assert check == check_release(load_bundle(paths[method], random_state=5), ds.X, n_rows=40, random_state=1)
    every = check_release(load_bundle(paths[method], random_state=5), ds.X, n_rows=10**6, random_state=1)
    assert every.n_checked == every.n_rejected == len(rejected)
    # the rows drawn: an exact binomial interval around the share; every row: no draw, the share itself
    k = sum(valid)
    assert check.valid_ci == pytest.approx(binomtest(k, len(answers)).proportion_ci(method="exact"))
    assert check.valid_ci[0] <= check.valid_share <= check.valid_ci[1]
    assert every.valid_ci == (every.valid_share, every.valid_share) and "every rejected row" in every.describe()


def test_cli_publish_prints_the_check_on_stderr_and_keeps_it_out_of_the_bundle(tmp_path, monkeypatch):
    """publish answers --check-rows rejected rows and prints the check (stderr; stdout stays one JSON line), warns
    below LOW_VALIDITY, writes nothing of it into the bundle, and skips it with --check-rows 0."""
    from recourse_privacy.service import release_check

    ds = tiny_dataset(300)
    csv = tmp_path / "loans.csv"
    ds.X.assign(decision=np.where(ds.y == 1, "approved", "denied")).to_csv(csv, index=False)
    args = ("publish", "--method", "dpm", "--epsilon", "2", "--data", str(csv), "--target", "decision",
            "--positive-label", "approved")  # fmt: skip
    for col, (lo, hi) in BOUNDS.items():
        args += ("--bounds", f"{col}={lo}:{hi}")
    res = cli(*args, "--check-rows", "25", "--out", str(tmp_path / "b"))
    assert json.loads(res.stdout.strip())["method"] == "dpm"
    assert re.search(r"check on 25 of the \d+ training rows the bundle's model rejects .*% answered", res.stderr)
    bundle_text = "".join(p.read_text(errors="replace") for p in (tmp_path / "b").iterdir() if p.is_file())
    assert "check on" not in bundle_text and "valid_share" not in bundle_text
    low = release_check.ReleaseCheck(100, 25, 0.2, 0.0, 1.5)
    monkeypatch.setattr(release_check, "check_release", lambda *a, **k: low)
    res = cli(*args, "--check-rows", "25", "--out", str(tmp_path / "c"))
    assert "20.0% answered" in res.stderr and "warning: fewer than 50% of the checked answers are valid" in res.stderr
    lo, hi = binomtest(5, 25).proportion_ci(method="exact")  # 5 of the 25 rows valid
    assert f"95% interval over the rows drawn {lo:.1%}-{hi:.1%}" in res.stderr and "another --seed" in res.stderr
    res = cli(*args, "--check-rows", "0", "--out", str(tmp_path / "d"))
    assert "check on" not in res.stderr and "warning: fewer" not in res.stderr
    assert cli(*args, "--check-rows", "-1", "--out", str(tmp_path / "e"), check=False).returncode == 2


# ------------------------------------------------------------------ ledger
def _spend_loop(url, n, q):
    led = open_ledger(url)
    ok = 0
    for _ in range(n):
        try:
            led.spend("k", epsilon_each=0.1, n=1, budget=1.0, cap=None)
            ok += 1
        except Refusal:
            pass
    q.put(ok)


def test_sqlite_ledger_never_overspends_across_processes(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    open_ledger(url)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_spend_loop, args=(url, 8, q)) for _ in range(3)]
    for p in procs:
        p.start()
    oks = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    led = open_ledger(url)
    assert sum(oks) == 10 and led.account("k").answers == 10 and led.account("k").spent == pytest.approx(1.0)


def test_spend_many_checks_each_request_against_the_running_totals_in_one_transaction(tmp_path):
    led = open_ledger(tmp_path / "l.db")
    reqs = [SpendRequest("a", 0.5, 1, 2.0, None) for _ in range(6)] + [SpendRequest("b", 0.0, 2, 0.0, 3)] * 2
    out = led.spend_many(reqs)
    assert [isinstance(o, Refusal) for o in out] == [False] * 4 + [True] * 2 + [False, True]
    assert [o.spent for o in out[:4]] == pytest.approx([0.5, 1.0, 1.5, 2.0]) and out[4].reason == "budget"
    assert out[7].reason == "query_cap" and out[6].answers == 2
    assert led.account("a") == Account(2.0, 4) and led.account("b") == Account(0.0, 2)


def test_group_commit_answers_only_the_granted_and_never_overspends(tmp_path):
    """12 threads at once on a budget of 4 answers: exactly 4 granted, and only they reach the answer function."""
    led = open_ledger(tmp_path / "l.db")
    answered, lock = [], threading.Lock()

    def answer(payloads):
        with lock:
            answered.extend(payloads)
        return [f"answer {p}" for p in payloads]

    gc = GroupCommitter(led, answer)
    out = [None] * 12
    barrier = threading.Barrier(12)

    def run(i):
        barrier.wait()
        out[i] = gc.submit(SpendRequest("k", 0.25, 1, 1.0, None), i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    granted = [i for i, (o, r) in enumerate(out) if not isinstance(o, Refusal)]
    assert len(granted) == 4 and sorted(answered) == granted
    assert all(out[i][1] == f"answer {i}" for i in granted)
    assert all(r is None and o.reason == "budget" for o, r in (out[i] for i in range(12) if i not in granted))
    assert led.account("k") == Account(1.0, 4)


def test_open_ledger_synchronous_option(tmp_path):
    assert open_ledger(f"sqlite:///{tmp_path / 'a.db'}?synchronous=normal").synchronous == "normal"
    assert open_ledger(f"sqlite:///{tmp_path / 'a.db'}").synchronous == "full"
    for bad in ("?synchronous=off", "?journal=wal"):
        with pytest.raises(InvalidInputError, match="synchronous"):
            open_ledger(f"sqlite:///{tmp_path / 'a.db'}{bad}")


def test_ledger_refusals_name_budget_spent_and_asked(tmp_path):
    led = open_ledger(tmp_path / "l.db")
    led.spend("a", epsilon_each=0.5, n=3, budget=2.0, cap=5)
    with pytest.raises(Refusal) as err:
        led.spend("a", epsilon_each=0.5, n=2, budget=2.0, cap=5)
    assert err.value.to_dict() | {"error": ""} == {"error": "", "reason": "budget", "budget": 2.0, "spent": 1.5,
                                                   "asked": 1.0, "unit": "epsilon"}  # fmt: skip
    with pytest.raises(Refusal) as err:
        led.spend("a", epsilon_each=0.0, n=3, budget=2.0, cap=5)
    assert err.value.reason == "query_cap" and err.value.spent == 3
    assert led.account("a").answers == 3 and led.total().spent == pytest.approx(1.5)
    with pytest.raises(InvalidInputError):
        open_ledger("mysql://x")


# ------------------------------------------------------------------ publish --model-file
def _user_pipeline(ds, classifier):
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    cols = ColumnTransformer([("num", StandardScaler(), ["age", "hours", "income"]),
                              ("cat", OneHotEncoder(handle_unknown="ignore"), ["job", "sex"])])  # fmt: skip
    return make_pipeline(cols, classifier).fit(ds.X, np.where(ds.y == 1, "approved", "denied"))


@pytest.mark.parametrize("method", ["laplace", "privrecourse", "dpc"])
def test_publish_model_file_serves_the_users_linear_pipeline_exactly(tmp_path, method):
    from sklearn.linear_model import LogisticRegression

    ds = tiny_dataset(300)
    pipe = _user_pipeline(ds, LogisticRegression(max_iter=1000))
    man = publish(ds, method=method, epsilon=1.0, out=tmp_path, bounds=BOUNDS, n_clusters=15, model=pipe,
                  positive_label="approved", model_source="m.skops")  # fmt: skip
    assert man["privacy"]["model"]["dp"] is False and not man["privacy"]["is_dp"]
    assert any("--model-file" in line for line in man["guarantee"]["does_not_cover"])
    assert not any(line.startswith("the model:") for line in man["guarantee"]["covers"])
    b = load_bundle(tmp_path, random_state=0)
    docs = [applicant(hours=h, income=2.0 * h, job=("clerk", "manager", "worker")[h % 3]) for h in range(0, 100, 7)]
    p = pipe.predict_proba(pd.DataFrame(docs))[:, list(pipe.classes_).index("approved")]
    served = b.model.logit(b.schema.encode(b.schema.parse_many(docs)))
    assert served == pytest.approx(np.log(p / (1 - p)), abs=1e-6)


def test_publish_model_file_serves_decisions_at_the_models_own_cutoff(tmp_path):
    """A FixedThresholdClassifier's cutoff, stated on "denied" (classes_[1]): the served logit is 0 where it is."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import FixedThresholdClassifier

    ds = tiny_dataset(300)
    inner = _user_pipeline(ds, LogisticRegression(max_iter=1000))
    wrapped = FixedThresholdClassifier(inner, threshold=0.7).fit(ds.X, np.where(ds.y == 1, "approved", "denied"))
    publish(ds, method="laplace", epsilon=1.0, out=tmp_path, bounds=BOUNDS, model=wrapped, positive_label="approved")
    b = load_bundle(tmp_path, random_state=0)
    docs = [applicant(hours=h, income=2.0 * h, job=("clerk", "manager", "worker")[h % 3]) for h in range(0, 100, 3)]
    frame = pd.DataFrame(docs)
    p = wrapped.predict_proba(frame)[:, list(wrapped.classes_).index("approved")]
    served = b.model.logit(b.schema.encode(b.schema.parse_many(docs)))
    assert served == pytest.approx(np.log(p / (1 - p)) - np.log(0.3 / 0.7), abs=1e-6)  # favourable from P = 0.3
    far = np.abs(p - 0.3) > 1e-6
    assert ((p > 0.3) & (p < 0.5)).any()  # applicants one half would have denied and the cutoff approves
    np.testing.assert_array_equal((served >= 0)[far], (wrapped.predict(frame) == "approved")[far])
    # the lender's own rule on a plain pipeline's score: approve from 0.8, written in the manifest
    man = publish(ds, method="laplace", epsilon=1.0, out=tmp_path / "b", bounds=BOUNDS, model=inner,
                  positive_label="approved", decision_threshold=0.8)  # fmt: skip
    assert man["privacy"]["model"]["decision_threshold"] == 0.8
    assert man["privacy"]["model"]["threshold_source"] == "decision_threshold"
    served = load_bundle(tmp_path / "b", random_state=0).model.logit(b.schema.encode(b.schema.parse_many(docs)))
    p = inner.predict_proba(frame)[:, list(inner.classes_).index("approved")]
    assert served == pytest.approx(np.log(p / (1 - p)) - np.log(0.8 / 0.2), abs=1e-6)
    with pytest.raises(InvalidInputError, match="decides at P"):  # not the cutoff the wrapper states
        publish(ds, method="laplace", epsilon=1.0, out=tmp_path / "c", bounds=BOUNDS, model=wrapped,
                positive_label="approved", decision_threshold=0.8)  # fmt: skip
    with pytest.raises(InvalidInputError, match="--model-file"):
        publish(ds, method="laplace", epsilon=1.0, out=tmp_path / "d", bounds=BOUNDS, decision_threshold=0.8)


def test_publish_model_file_refuses_a_nonlinear_model_and_dpm(tmp_path):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    from recourse_privacy.errors import IncompatibleError

    ds = tiny_dataset(300)
    forest = _user_pipeline(ds, RandomForestClassifier(n_estimators=5, random_state=0))
    with pytest.raises(IncompatibleError, match="not affine"):
        publish(ds, method="laplace", epsilon=1.0, out=tmp_path / "a", bounds=BOUNDS, model=forest,
                positive_label="approved")  # fmt: skip
    with pytest.raises(IncompatibleError, match="dpm"):
        publish(ds, method="dpm", epsilon=1.0, out=tmp_path / "b", bounds=BOUNDS,
                model=_user_pipeline(ds, LogisticRegression()), positive_label="approved")  # fmt: skip


def test_cli_publish_model_file(tmp_path):
    import skops.io as sio
    from sklearn.linear_model import LogisticRegression

    ds = tiny_dataset(300)
    csv = tmp_path / "loans.csv"
    ds.X.assign(decision=np.where(ds.y == 1, "approved", "denied")).to_csv(csv, index=False)
    sio.dump(_user_pipeline(ds, LogisticRegression(max_iter=1000)), tmp_path / "m.skops")
    args = ("publish", "--method", "laplace", "--epsilon", "0.5", "--data", str(csv), "--target", "decision",
            "--positive-label", "approved", "--immutable", "sex", "--model-file", str(tmp_path / "m.skops"))  # fmt: skip
    for col, (lo, hi) in BOUNDS.items():
        args += ("--bounds", f"{col}={lo}:{hi}")
    res = cli(*args, "--out", str(tmp_path / "b"))
    assert json.loads(res.stdout.splitlines()[-1])["method"] == "laplace"
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert man["privacy"]["model"]["source"] == "m.skops"
    names = sorted(p.name for p in (tmp_path / "b").iterdir() if not p.name.startswith("."))
    assert names == ["manifest.json", "model.npz"]  # the weights only: the model file is not copied


def test_compile_cache_refuses_a_directory_other_users_can_write(tmp_path):
    """The persistent cache holds machine code the server runs: a group- or world-writable directory is refused by
    the option's name before jax is configured; a new directory is made private."""
    from recourse_privacy.service.latent_search import use_compile_cache

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(InvalidInputError, match="--compile-cache .*writable by other users"):
        use_compile_cache(shared)
    assert oct(use_compile_cache(tmp_path / "new" / "xla").stat().st_mode & 0o777) == oct(0o700)


def test_compile_cache_refuses_a_directory_of_other_files(tmp_path):
    """jax writes and evicts entries in the cache directory: one holding the user's files is refused by name; a
    directory of jax's entries alone (an unmarked cache of stop 33) is taken and marked."""
    from recourse_privacy.service.latent_search import COMPILE_CACHE_MARKER, private_cache_dir

    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "notes.txt").write_text("mine")
    with pytest.raises(InvalidInputError, match=r"--compile-cache .*notes\.txt.*new or empty directory"):
        private_cache_dir(home)
    assert not (home / COMPILE_CACHE_MARKER).exists()
    old = tmp_path / "old"
    old.mkdir(mode=0o700)
    (old / f"jit_search-{'0' * 64}-cache").write_bytes(b"x")
    assert (private_cache_dir(old) / COMPILE_CACHE_MARKER).is_file()
    (old / "later.txt").write_text("a file added to a marked cache is the user's business")
    assert private_cache_dir(old) == old


def test_serve_compile_cache_option_defaults_to_the_user_cache_and_turns_off(tmp_path, monkeypatch):
    from recourse_privacy.service.cli import _compile_cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _compile_cache_dir(None) == tmp_path / "recourse-privacy" / "xla"
    assert _compile_cache_dir("off") is None
    assert _compile_cache_dir(str(tmp_path / "x")) == tmp_path / "x"


_RESTART = """
import json, os, sys
import numpy as np
from recourse_privacy.service.bundle import load_bundle
from recourse_privacy.service.latent_search import use_compile_cache
use_compile_cache(sys.argv[2])
g = load_bundle(sys.argv[1]).graph
g.warm(2)
U = np.random.default_rng(5).random((2, g.decoder[-1][0].shape[0]))
out, found = g.search(U, np.ones(U.shape[1]), 0.0)
print(json.dumps(out.tolist()))
"""


def test_a_restarted_dpc_process_loads_its_compiled_searches_from_the_cache(bundles, tmp_path):
    """Two processes in turn on one compile cache (a server and its restart): the first writes its programs, the
    second finds every one (no entry added or rewritten) and answers the same."""
    import subprocess
    import sys

    cache = tmp_path / "xla"
    script = tmp_path / "restart.py"
    script.write_text(_RESTART)

    def run() -> list:
        done = subprocess.run([sys.executable, str(script), str(bundles[1]["dpc"]), str(cache)], capture_output=True,
                              text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = run()
    entries = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    assert len(entries) >= 2  # the two warmed sizes at least
    second = run()
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file() and "atime" not in p.name} == {
        p: t for p, t in entries.items() if "atime" not in p.name
    }
    assert second == first


def _random_applicants(rng, n: int) -> list[dict]:
    """``n`` seeded applicants of the tiny schema spread over its bounds and categories."""
    return [applicant(age=int(a), hours=int(h), income=float(i), job=str(j)) for a, h, i, j in zip(
        rng.integers(18, 80, n), rng.integers(0, 60, n), rng.uniform(0, 120, n).round(2),
        rng.choice(["clerk", "manager", "worker"], n))]  # fmt: skip
