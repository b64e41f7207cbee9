"""A lender's own nonlinear classifier (gradient-boosted trees) published with ``--method privrecourse`` and served
as it is: the bundle keeps its .skops file, decides applicants with it in their own units, and every answer's
``valid`` is that model's decision on the counterfactual (the PrivRecourse graph, Pentyala et al. 2023, needs
only the model's decisions)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from _service_util import BOUNDS, applicant, cli, tiny_dataset
from recourse_privacy.errors import IncompatibleError
from recourse_privacy.service.bundle import load_bundle, publish
from recourse_privacy.service.release_check import check_release

pytest.importorskip("skops")

APPROVED = "approved"


def _boosted(ds, threshold: float | None = None):
    """One-hot categories and 60 boosted trees, fitted on the tiny data (labels approved / denied)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import FixedThresholdClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    cols = ColumnTransformer(
        [("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), ["job", "sex"])], remainder="passthrough"
    )
    pipe = make_pipeline(cols, HistGradientBoostingClassifier(max_iter=60, random_state=0))
    y = np.where(ds.y == 1, APPROVED, "denied")
    if threshold is not None:
        return FixedThresholdClassifier(pipe, threshold=threshold, pos_label=APPROVED).fit(ds.X, y)
    return pipe.fit(ds.X, y)


def _docs() -> list[dict]:
    jobs = ("clerk", "manager", "worker")
    return [applicant(hours=h % 81, income=1.7 * h + 0.5, age=20 + h % 50, job=jobs[h % 3]) for h in range(0, 120, 2)]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    ds = tiny_dataset(600)
    est = _boosted(ds)
    out = tmp_path_factory.mktemp("boosted")
    man = publish(ds, method="privrecourse", epsilon=4.0, out=out, bounds=BOUNDS, n_clusters=40, model=est,
                  positive_label=APPROVED, model_source="gbt.skops")  # fmt: skip
    return ds, est, out, man


def test_the_bundle_keeps_the_classifier_and_says_it_is_not_covered(served) -> None:
    _, est, out, man = served
    entry = man["model"]
    assert entry["kind"] == "estimator" and entry["file"] == "model.skops" and entry["favourable"] == APPROVED
    assert entry["estimator"] == type(est).__name__ and entry["decision_threshold"] == 0.5
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == [
        "graph.json", "graph.npz", "manifest.json", "model.skops",
    ]  # fmt: skip
    assert man["files"]["model.skops"] == entry["sha256"]
    assert man["privacy"]["model"]["served"] == "as it is (model.skops)" and not man["privacy"]["is_dp"]
    assert any("--model-file" in line for line in man["guarantee"]["does_not_cover"])
    assert any(line.startswith("model.skops: ") for line in man["guarantee"]["does_not_cover"])
    # the graph's nodes as they are: sparse answers would follow this non-private model's boundary
    assert man["answers"]["sparse"] is False
    assert not any(line.startswith("sparse answers") for line in man["guarantee"]["does_not_cover"])


def test_sparse_answers_with_a_users_model_are_asked_for_and_said_not_covered(served, tmp_path) -> None:
    ds, est, _, _ = served
    man = publish(ds, method="privrecourse", epsilon=4.0, out=tmp_path, bounds=BOUNDS, n_clusters=40, model=est,
                  positive_label=APPROVED, sparse=True)  # fmt: skip
    assert man["answers"]["sparse"] is True
    assert any(line.startswith("sparse answers with the user's model") for line in man["guarantee"]["does_not_cover"])
    b = load_bundle(tmp_path, random_state=0)
    answers = b.answer(b.schema.parse_many(_docs()))
    found = [a for a in answers if a["counterfactual"] is not None and a["valid"]]
    assert found and np.mean([len(a["changes"]) for a in found]) < 5


def test_decisions_and_validity_are_the_classifiers_own(served) -> None:
    """Every applicant's decision is the classifier's ``predict`` on the applicant as sent; every counterfactual's
    ``valid`` is its ``predict`` on that counterfactual; the graph's answers keep the action set."""
    _, est, out, _ = served
    b = load_bundle(out, random_state=0)
    docs = _docs()
    answers = b.answer(b.schema.parse_many(docs))
    decided = est.predict(pd.DataFrame(docs)) == APPROVED
    assert [a["decision"] == "accepted" for a in answers] == decided.tolist()
    assert 0 < decided.sum() < len(docs)
    found = [(d, a) for d, a in zip(docs, answers) if a["counterfactual"] is not None]
    assert len(found) >= 0.5 * (~decided).sum()
    cfs = pd.DataFrame([a["counterfactual"] for _, a in found])
    np.testing.assert_array_equal([a["valid"] for _, a in found], est.predict(cfs) == APPROVED)
    assert sum(a["valid"] for _, a in found) >= 0.5 * len(found)
    for d, a in found:
        assert a["counterfactual"]["sex"] == d["sex"] and a["counterfactual"]["age"] >= d["age"]
        assert a["reasons"] and set(a["reasons"]) <= set(d)
    # the server's text is exactly the JSON of these answers
    texts = load_bundle(out, random_state=0).answer_json(b.schema.parse_many(docs)).texts
    assert texts == [json.dumps(a, separators=(",", ":"), allow_nan=False) for a in answers]


def test_the_release_check_reads_the_classifiers_rejections(served) -> None:
    ds, est, out, _ = served
    check = check_release(load_bundle(out, random_state=0), ds.X, n_rows=10**6, random_state=0)
    assert check.n_rejected == int((est.predict(ds.X) != APPROVED).sum()) == check.n_checked
    assert check.valid_share > 0.5


def test_a_stated_cutoff_is_served(tmp_path) -> None:
    """A FixedThresholdClassifier approving from P(approved) = 0.7: the bundle decides as its ``predict``."""
    ds = tiny_dataset(600)
    est = _boosted(ds, threshold=0.7)
    man = publish(ds, method="privrecourse", epsilon=4.0, out=tmp_path, bounds=BOUNDS, n_clusters=40, model=est,
                  positive_label=APPROVED)  # fmt: skip
    assert man["model"]["decision_threshold"] == pytest.approx(0.7)
    b = load_bundle(tmp_path, random_state=0)
    docs = [applicant(hours=h, income=inc) for h in range(0, 81) for inc in (60.0, 100.0, 140.0)]  # across the rule
    frame = pd.DataFrame(docs)
    p = est.predict_proba(frame)[:, list(est.classes_).index(APPROVED)]
    assert ((p > 0.5) & (p < 0.7)).any()  # applicants one half would approve and the cutoff denies
    far = np.abs(p - 0.7) > 1e-9
    decided = np.array([a["decision"] == "accepted" for a in b.answer(b.schema.parse_many(docs))])
    np.testing.assert_array_equal(decided[far], (est.predict(frame) == APPROVED)[far])


def test_laplace_and_dpc_refuse_it_naming_privrecourse(served, tmp_path) -> None:
    ds, est, _, _ = served
    for method in ("laplace", "dpc"):
        with pytest.raises(IncompatibleError, match="--method privrecourse serves any classifier"):
            publish(ds, method=method, epsilon=1.0, out=tmp_path / method, bounds=BOUNDS, model=est,
                    positive_label=APPROVED)  # fmt: skip


def test_publish_from_a_skops_file_and_serve_it_over_http(tmp_path) -> None:
    """The command line: publish the .skops file (its types trusted as skops asks), serve it on a loopback port,
    8 concurrent clients get the bundle's own answers (one applicant and batches), bad input a 422 naming it."""
    pytest.importorskip("uvicorn")
    httpx = pytest.importorskip("httpx")
    import skops.io as sio

    from _service_util import Server
    from recourse_privacy.service.keys import KeyStore

    ds = tiny_dataset(400)
    csv = tmp_path / "loans.csv"
    ds.X.assign(decision=np.where(ds.y == 1, APPROVED, "denied")).to_csv(csv, index=False)
    sio.dump(_boosted(ds), tmp_path / "gbt.skops")
    args = ["publish", "--method", "privrecourse", "--epsilon", "4", "--data", str(csv), "--target", "decision",
            "--positive-label", APPROVED, "--immutable", "sex", "--increasing", "age", "--model-file",
            str(tmp_path / "gbt.skops"), "--n-clusters", "40", "--out", str(tmp_path / "b")]  # fmt: skip
    for col, (lo, hi) in BOUNDS.items():
        args += ["--bounds", f"{col}={lo}:{hi}"]
    untrusted = sio.get_untrusted_types(file=tmp_path / "gbt.skops")
    if untrusted:
        refused = cli(*args, check=False)
        assert refused.returncode == 2 and "--trust" in refused.stderr
        args += ["--trust", ",".join(untrusted)]
    res = cli(*args)
    assert "check on" in res.stderr
    key = KeyStore(tmp_path / "keys.json").add("main")
    docs = _docs()[:16]
    server = Server(tmp_path / "b", tmp_path / "keys.json", tmp_path / "ledger.db")

    def ask(i: int):  # one applicant, or (odd i) the batch of them all
        with httpx.Client(timeout=60, headers={"X-API-Key": key}) as c:
            if i % 2:
                return c.post(server.url + "/v1/recourse/batch", json={"applicants": docs})
            return c.post(server.url + "/v1/recourse", json={"applicant": docs[i]})

    try:
        with ThreadPoolExecutor(8) as pool:  # 8 concurrent clients
            replies = list(pool.map(ask, range(16)))
        bad = httpx.post(server.url + "/v1/recourse", json={"applicant": applicant(income="lots")},
                         headers={"X-API-Key": key}, timeout=30)  # fmt: skip
    finally:
        server.kill()
    assert [r.status_code for r in replies] == [200] * 16, [r.text for r in replies if r.status_code != 200]
    assert bad.status_code == 422 and bad.json()["field"] == "applicant.income"
    b = load_bundle(tmp_path / "b", random_state=0)
    expected = b.answer(b.schema.parse_many(docs))
    for i, r in enumerate(replies):
        got = r.json()["answers"] if i % 2 else [r.json()]
        want = expected if i % 2 else [expected[i]]
        assert [{k: v for k, v in g.items() if k in w} for g, w in zip(got, want)] == want


@pytest.mark.parametrize("favourable", ["approved", "yes"])
def test_a_tie_is_served_as_the_classifiers_own_predict(tmp_path, favourable) -> None:
    """A tree whose leaves hold as many of each class (P = 0.5): scikit-learn's ``predict`` takes the first class
    of a tie, so "approved" (first of approved / denied) wins it and "yes" (second of no / yes) loses it; the bundle
    decides every row as ``predict`` does, and one published before the manifest said so decides ties as it did."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder
    from sklearn.tree import DecisionTreeClassifier

    ds = tiny_dataset(600)
    other = "denied" if favourable == "approved" else "no"
    cols = ColumnTransformer(
        [("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), ["job", "sex"])], remainder="passthrough"
    )
    est = make_pipeline(cols, DecisionTreeClassifier(max_depth=9, min_samples_leaf=2, random_state=0))
    est.fit(ds.X, np.where(ds.y == 1, favourable, other))
    p = est.predict_proba(ds.X)[:, list(est.classes_).index(favourable)]
    tie = p == 0.5
    assert tie.sum() >= 5
    man = publish(ds, method="privrecourse", epsilon=4.0, out=tmp_path / "b", bounds=BOUNDS, n_clusters=40,
                  model=est, positive_label=favourable)  # fmt: skip
    entry = json.loads((tmp_path / "b" / "manifest.json").read_text())["model"]
    assert entry["ties_favourable"] == (favourable == "approved") and man["model"]["decision_threshold"] == 0.5
    b = load_bundle(tmp_path / "b", random_state=0)
    decided = b.decide(b.schema.applicants_from_frame(ds.X))
    np.testing.assert_array_equal(decided, est.predict(ds.X) == favourable)
    assert (decided[tie] == (favourable == "approved")).all()
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    del manifest["model"]["ties_favourable"]
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(manifest))
    old = load_bundle(tmp_path / "b", random_state=0).decide(b.schema.applicants_from_frame(ds.X))
    assert not old[tie].any() and (old[~tie] == decided[~tie]).all()


def test_kill_9_under_load_never_loses_a_counted_answer_nor_exceeds_the_query_cap(served, tmp_path) -> None:
    """The lender's own classifier behind a two-worker server, killed with -9 mid-load and restarted on the same
    ledger. PrivRecourse spends its epsilon at publish (its answers are post-processing), so what protects the data
    here is the key's query cap: every answer a client holds was counted before it was sent, the cap holds across
    the kill, and every answer is the bundle's own (the classifier's decisions, the same node for the same row)."""
    pytest.importorskip("uvicorn")
    httpx = pytest.importorskip("httpx")
    import itertools
    import threading

    from _service_util import Server, start_clients
    from recourse_privacy.service.keys import KeyStore, hash_key
    from recourse_privacy.service.ledger import open_ledger

    _, _, out, _ = served
    cap = 60
    key = KeyStore(tmp_path / "k.json").add("load", query_cap=cap)
    docs = _docs()[:12]
    b = load_bundle(out, random_state=0)
    want = {i: a for i, a in enumerate(b.answer(b.schema.parse_many(docs)))}
    received: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def client(url, stop, start):
        with httpx.Client(timeout=10, headers={"X-API-Key": key}) as c:
            for i in itertools.count(start):
                if stop.is_set():
                    return
                try:
                    r = c.post(url + "/v1/recourse", json={"applicant": docs[i % len(docs)]})
                except httpx.HTTPError:
                    return  # the server is gone
                if r.status_code == 429:
                    return
                assert r.status_code == 200, r.text
                with lock:
                    received.append((i % len(docs), r.json()))

    def load(server, until):
        return start_clients(client, server.url, received, until)

    server = Server(out, tmp_path / "k.json", tmp_path / "l.db", workers=2)
    stop, threads = load(server, 20)
    server.kill()  # SIGKILL to the parent and both workers, mid-load
    stop.set()
    for t in threads:
        t.join()
    kid = hash_key(key)[:16]
    first, at_kill = open_ledger(tmp_path / "l.db").account(kid), len(received)
    assert 20 <= at_kill <= first.answers <= cap  # every answer a client holds was counted before it left
    assert first.spent == 0.0  # post-processing: no per-answer epsilon
    server = Server(out, tmp_path / "k.json", tmp_path / "l.db")  # one worker: the cap, not the race, is asked here
    try:
        stop, threads = load(server, cap + 1)  # runs until every client is refused (429)
        for t in threads:
            t.join()
    finally:
        server.kill()
    final = open_ledger(tmp_path / "l.db").account(kid)
    print(
        f"kill -9: {at_kill} held, ledger {first.answers}; restarted: {len(received)} held, ledger {final.answers}/{cap}"
    )
    assert len(received) <= final.answers <= cap and len(received) > at_kill
    for i, got in received:  # the bundle's own answers, before and after the kill
        assert {k: v for k, v in got.items() if k in want[i]} == want[i]
