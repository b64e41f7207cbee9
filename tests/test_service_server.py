"""``recourse-privacy serve`` tested as a server: a subprocess on a loopback port, hit over HTTP by threads.

One Laplace server (epsilon 0.5 per answer) serves the auth, bad-input, budget, query-cap,
batch, revocation, metrics and page tests; the kill -9 test starts its own two-worker server
twice on one ledger.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path

import pytest

from _service_util import BOUNDS, Server, applicant, gappy_dataset, headless_chromium, start_clients, tiny_dataset

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from recourse_privacy.service.bundle import publish  # noqa: E402
from recourse_privacy.service.keys import KeyStore, hash_key  # noqa: E402
from recourse_privacy.service.ledger import open_ledger  # noqa: E402

EPS = 0.5
#: the features that may be missing in :func:`gappy_dataset`
GAP = ("hours", "job")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    publish(tiny_dataset(), method="laplace", epsilon=EPS, out=d / "bundle", bounds=BOUNDS)
    keys = KeyStore(d / "keys.json")
    k = {
        "main": keys.add("main", budget=1000.0),
        "four": keys.add("four", budget=4 * EPS),  # a budget of exactly 4 answers
        "cap": keys.add("cap", budget=1000.0, query_cap=4),
        "batch": keys.add("batch", budget=1000.0 * EPS),
        "gone": keys.add("gone", budget=10.0),
    }
    server = Server(d / "bundle", d / "keys.json", d / "ledger.db", extra=("--log-file", str(d / "answers.log")))
    yield {"dir": d, "keys": k, "server": server, "url": server.url, "store": keys}
    server.kill()


def _post(url, path, doc, key, **kw):
    return httpx.post(url + path, json=doc, headers={"X-API-Key": key}, timeout=30, **kw)


def test_health_manifest_and_page(site):
    url = site["url"]
    assert httpx.get(url + "/health").json()["status"] == "ok"
    man = httpx.get(url + "/v1/manifest").json()
    assert man["method"] == "laplace" and [f["name"] for f in man["features"]][:2] == ["age", "hours"]
    page = httpx.get(url + "/").text
    assert "<select id='f-job'" in page and "max='100'" in page and "<option value='manager'>" in page


def test_auth(site):
    url = site["url"]
    for headers in ({}, {"X-API-Key": ""}, {"X-API-Key": "rpk_wrong"}, {"X-API-Key": site["keys"]["main"] + "x"}):
        r = httpx.post(url + "/v1/recourse", json={"applicant": applicant()}, headers=headers)
        assert r.status_code == 401 and "error" in r.json()
        assert httpx.get(url + "/v1/budget", headers=headers).status_code == 401


def test_answer_spends_epsilon_and_is_logged(site):
    url, key = site["url"], site["keys"]["main"]
    before = httpx.get(url + "/v1/budget", headers={"X-API-Key": key}).json()
    r = _post(url, "/v1/recourse", {"applicant": applicant()}, key)
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["decision"] == "rejected" and a["epsilon_spent"] == EPS
    assert set(a["counterfactual"]) == {"age", "hours", "income", "job", "sex"}
    assert a["budget"]["spent"] == pytest.approx(before["spent"] + EPS)
    assert a["budget"]["remaining"] == pytest.approx(1000.0 - a["budget"]["spent"])
    time.sleep(0.3)
    lines = [json.loads(line) for line in (site["dir"] / "answers.log").read_text().splitlines()]
    assert any(rec["key"] == "main" and rec["epsilon"] == EPS for rec in lines)
    assert all("applicants" not in rec for rec in lines)  # applicant data only with --log-applicants


def _bad_requests(url, key):
    """(description, request kwargs, expected status, expected field or None)."""
    good = applicant()
    j = lambda doc: {"content": json.dumps(doc).encode()}
    without_hours = {k: v for k, v in good.items() if k != "hours"}
    big = b'{"applicant": {"age": 30, "pad": "' + b"x" * 1_000_100 + b'"}}'

    def chunked():
        yield big[:500_000]
        yield big[500_000:]

    return [
        ("not JSON", {"content": b"{"}, 422, "body"),
        ("empty body", {"content": b""}, 422, "body"),
        ("invalid UTF-8", {"content": b'{"applicant": "\xff\xfe"}'}, 422, "body"),
        ("NaN literal", {"content": b'{"applicant": {"age": NaN}}'}, 422, "body"),
        ("a JSON list", j([good]), 422, "body"),
        ("a JSON string", j("hi"), 422, "body"),
        ("no applicant", j({}), 422, "applicant"),
        ("an extra top-level field", j({"applicant": good, "x": 1}), 422, "x"),
        ("applicant is a list", j({"applicant": [1, 2]}), 422, "applicant"),
        ("applicant is null", j({"applicant": None}), 422, "applicant"),
        ("unknown feature", j({"applicant": {**good, "salary": 3}}), 422, "applicant.salary"),
        ("missing feature", j({"applicant": without_hours}), 422, "applicant.hours"),
        ("string for a number", j({"applicant": {**good, "hours": "20"}}), 422, "applicant.hours"),
        ("bool for a number", j({"applicant": {**good, "hours": True}}), 422, "applicant.hours"),
        ("null for a number", j({"applicant": {**good, "hours": None}}), 422, "applicant.hours"),
        ("object for a number", j({"applicant": {**good, "hours": {"a": 1}}}), 422, "applicant.hours"),
        ("above the upper bound", j({"applicant": {**good, "hours": 100.5}}), 422, "applicant.hours"),
        ("below the lower bound", j({"applicant": {**good, "age": 17}}), 422, "applicant.age"),
        ("1e999 (infinite)", {"content": b'{"applicant": {"age": 1e999}}'}, 422, "applicant.age"),
        ("a 400-digit integer", {"content": ('{"applicant": {"age": 1' + "0" * 400 + "}}").encode()}, 422, None),
        ("unknown category", j({"applicant": {**good, "job": "pilot"}}), 422, "applicant.job"),
        ("number for a category", j({"applicant": {**good, "job": 1}}), 422, "applicant.job"),
        ("category in the wrong case", j({"applicant": {**good, "sex": "f"}}), 422, "applicant.sex"),
        ("deep nesting", {"content": b'{"applicant": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"}, 422, None),
        ("body over 1 MB", {"content": big}, 413, None),
        ("chunked body over 1 MB", {"content": chunked()}, 413, None),
        ("batch: not a list", j({"applicants": good}), 422, "applicants"),
        ("batch: empty", j({"applicants": []}), 422, "applicants"),
        ("batch: 1,001 applicants", j({"applicants": [good] * 1001}), 422, "applicants"),
        ("batch: one bad applicant", j({"applicants": [good, good, {**good, "job": "x"}]}), 422, "applicants[2].job"),
        ("batch: single body", j({"applicant": good}), 422, "applicant"),
    ]


def test_bad_input_is_422_naming_the_field_or_413_never_500(site):
    url, key = site["url"], site["keys"]["main"]
    spent = httpx.get(url + "/v1/budget", headers={"X-API-Key": key}).json()["spent"]
    seen = []
    for desc, kw, status, field in _bad_requests(url, key):
        path = "/v1/recourse/batch" if desc.startswith("batch") else "/v1/recourse"
        r = httpx.post(url + path, headers={"X-API-Key": key, "Content-Type": "application/json"}, timeout=30, **kw)
        seen.append((desc, r.status_code))
        assert r.status_code == status, (desc, r.status_code, r.text[:300])
        body = r.json()
        assert "error" in body
        if field is not None:
            assert body["field"] == field, (desc, body)
    assert httpx.get(url + "/v1/recourse").status_code == 405
    # nothing was spent by a refused request
    assert httpx.get(url + "/v1/budget", headers={"X-API-Key": key}).json()["spent"] == spent
    print(f"{len(seen)} bad-input cases:", ", ".join(f"{d}: {s}" for d, s in seen))


def _hammer(url, path, doc, key, n):
    """``n`` threads released at once by a barrier; their status codes and bodies."""
    barrier = threading.Barrier(n)
    out = [None] * n

    def run(i):
        with httpx.Client(timeout=60) as c:
            barrier.wait()
            r = c.post(url + path, json=doc, headers={"X-API-Key": key})
            out[i] = (r.status_code, r.json())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_a_budget_of_4_answers_hit_by_12_simultaneous_requests_answers_exactly_4(site):
    url, key = site["url"], site["keys"]["four"]
    out = _hammer(url, "/v1/recourse", {"applicant": applicant()}, key, 12)
    codes = sorted(c for c, _ in out)
    assert codes == [200] * 4 + [429] * 8, codes
    refused = [b for c, b in out if c == 429]
    assert all(b["reason"] == "budget" and b["budget"] == 4 * EPS and b["asked"] == EPS for b in refused)
    assert all(b["spent"] == pytest.approx(4 * EPS) for b in refused)
    led = open_ledger(site["dir"] / "ledger.db").account(hash_key(key)[:16])
    assert led.answers == 4 and led.spent == pytest.approx(4 * EPS)


def test_query_cap_of_4_hit_by_12_simultaneous_requests(site):
    url, key = site["url"], site["keys"]["cap"]
    out = _hammer(url, "/v1/recourse", {"applicant": applicant()}, key, 12)
    assert sorted(c for c, _ in out) == [200] * 4 + [429] * 8
    assert {b["reason"] for c, b in out if c == 429} == {"query_cap"}
    assert httpx.get(url + "/v1/budget", headers={"X-API-Key": key}).json()["answers"] == 4


def test_batch_spends_all_or_nothing(site):
    url, key = site["url"], site["keys"]["batch"]  # budget: 1000 answers
    r = _post(url, "/v1/recourse/batch", {"applicants": [applicant(hours=h % 100) for h in range(999)]}, key)
    assert r.status_code == 200 and len(r.json()["answers"]) == 999
    assert r.json()["epsilon_spent"] == pytest.approx(999 * EPS)
    r = _post(url, "/v1/recourse/batch", {"applicants": [applicant()] * 2}, key)
    assert r.status_code == 429 and r.json()["asked"] == pytest.approx(2 * EPS)
    assert _post(url, "/v1/recourse/batch", {"applicants": [applicant()]}, key).status_code == 200
    assert httpx.get(url + "/v1/budget", headers={"X-API-Key": key}).json()["answers"] == 1000


def test_a_revoked_key_is_refused_without_restart(site):
    url, key = site["url"], site["keys"]["gone"]
    assert _post(url, "/v1/recourse", {"applicant": applicant()}, key).status_code == 200
    time.sleep(1.1)
    site["store"].revoke("gone")
    time.sleep(1.2)
    assert _post(url, "/v1/recourse", {"applicant": applicant()}, key).status_code == 401


def test_metrics(site):
    text = httpx.get(site["url"] + "/metrics").text
    assert 'rp_requests_total{endpoint="/v1/recourse",status="200"}' in text
    assert "rp_request_seconds_bucket" in text and 'rp_refusals_total{reason="budget"}' in text
    assert 'rp_refusals_total{reason="invalid"}' in text and "rp_epsilon_spent_total" in text


# ------------------------------------------------------------------ kill -9
@pytest.mark.parametrize(
    ("sync", "gaps"),
    [("", False), pytest.param("?synchronous=normal", False, marks=pytest.mark.slow), ("", True)],
    ids=["full", "normal", "gaps"],
)
def test_kill_9_under_load_never_loses_a_spend_nor_overspends(tmp_path, sync, gaps):
    """WAL with synchronous=normal too: a kill -9 ends the process, not the OS, which still holds the WAL's writes.
    ``gaps``: a bundle on data with gaps, every other request with hours and job null (answered with them held)."""
    data = gappy_dataset(300) if gaps else tiny_dataset(300)
    publish(data, method="laplace", epsilon=EPS, out=tmp_path / "b", bounds=BOUNDS)
    docs = [applicant(hours=None, job=None), applicant()] if gaps else [applicant()]
    budget_answers = 60
    key = KeyStore(tmp_path / "k.json").add("load", budget=budget_answers * EPS)
    kid = hash_key(key)[:16]
    received, held = [], []
    lock = threading.Lock()

    def client(url, stop, _k):
        with httpx.Client(timeout=10) as c:
            for i in itertools.count():
                if stop.is_set():
                    return
                doc = docs[i % len(docs)]
                try:
                    r = c.post(url + "/v1/recourse", json={"applicant": doc}, headers={"X-API-Key": key})
                except httpx.HTTPError:
                    return  # the server is gone
                if r.status_code == 200:
                    cf = r.json()["counterfactual"]
                    with lock:
                        received.append(r.json()["epsilon_spent"])
                        if cf is not None:  # answered with a counterfactual: the gaps held, none opened
                            held.append((doc["hours"] is None, all((cf[k] is None) == (doc[k] is None) for k in GAP)))
                elif r.status_code == 429:
                    return

    def load(server, until):
        return start_clients(client, server.url, received, until)

    ledger = f"sqlite:///{tmp_path / 'l.db'}{sync}"
    server = Server(tmp_path / "b", tmp_path / "k.json", ledger, workers=2)
    stop, threads = load(server, 20)
    server.kill()  # SIGKILL to the parent and both workers, mid-load
    stop.set()
    for t in threads:
        t.join()
    led = open_ledger(tmp_path / "l.db")
    first, at_kill = led.account(kid), len(received)
    assert len(received) >= 20
    assert first.spent >= sum(received) - 1e-9  # every answer a client holds is in the ledger
    assert first.spent <= budget_answers * EPS
    # restart on the same ledger and spend the rest: the total never passes the budget
    server = Server(tmp_path / "b", tmp_path / "k.json", ledger, workers=2)
    try:
        stop, threads = load(server, 10**9)
        for t in threads:
            t.join()
    finally:
        server.kill()
    final = open_ledger(tmp_path / "l.db").account(kid)
    assert final.spent <= budget_answers * EPS + 1e-9 and final.answers <= budget_answers
    assert final.spent >= sum(received) - 1e-9
    assert len(received) <= budget_answers
    assert all(ok for _, ok in held) and any(gap for gap, _ in held) == gaps  # gaps held (and answered)
    print(
        f"kill -9: ledger {first.answers} answers (epsilon {first.spent:g}), clients held {at_kill} "
        f"(epsilon {at_kill * EPS:g}); after the restart {len(received)} received in all, "
        f"final ledger {final.answers} answers, epsilon {final.spent:g} of {budget_answers * EPS:g}"
    )


@pytest.mark.parametrize("nodelay", [True, False])
def test_a_connection_on_a_socket_made_elsewhere_gets_nodelay_from_the_servers_protocol(nodelay):
    """With --workers 2 uvicorn hands its workers a listening socket made with protocol number 0, on whose connections
    asyncio leaves Nagle on, and every response then waited for the client's delayed ACK (at least 40 ms on Linux;
    service/transport.py). The server's protocol turns TCP_NODELAY on for each connection it is given: asserted on
    the accepted socket itself, beside uvicorn's own protocol on the same socket, which leaves it off (the bug).
    The latency this buys is measured in benchmarks/bench_serve.py, not here."""
    import asyncio
    import socket

    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol
    from uvicorn.server import ServerState

    from recourse_privacy.service.transport import NoDelayHTTPProtocol

    async def app(scope, receive, send):  # never called: the test reads the socket, not a response
        raise AssertionError("no request is sent")

    config = uvicorn.Config(app, log_level="warning")
    config.load()
    state, made = ServerState(), []
    cls = NoDelayHTTPProtocol if nodelay else AutoHTTPProtocol

    def factory():
        made.append(cls(config=config, server_state=state, app_state={}))
        return made[-1]

    async def accept_one() -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0)  # protocol 0, as uvicorn's workers get it
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        server = await asyncio.get_running_loop().create_server(factory, sock=listener)
        try:
            _, writer = await asyncio.open_connection(*listener.getsockname())
            for _ in range(200):  # until the server side has accepted the connection
                if made and made[-1].transport is not None:
                    break
                await asyncio.sleep(0.01)
            accepted = made[-1].transport.get_extra_info("socket")
            value = accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            writer.close()
            return value
        finally:
            server.close()

    assert bool(asyncio.run(accept_one())) is nodelay


# ------------------------------------------------------------------ the page in a browser
def test_applicant_page_in_headless_chromium(site, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    drv = headless_chromium()
    try:
        drv.get(site["url"] + "/")
        assert [o.text for o in Select(drv.find_element(By.ID, "f-job")).options] == ["clerk", "manager", "worker"]
        hours = drv.find_element(By.ID, "f-hours")
        assert hours.get_attribute("min") == "0" and hours.get_attribute("max") == "100"
        for name, value in applicant().items():
            el = drv.find_element(By.ID, f"f-{name}")
            if el.tag_name == "select":
                Select(el).select_by_value(value)
            else:
                el.clear()
                el.send_keys(str(value))
        drv.find_element(By.ID, "api-key").send_keys(site["keys"]["main"])
        drv.find_element(By.ID, "submit").click()
        WebDriverWait(drv, 20).until(ec.presence_of_element_located((By.ID, "decision")))
        assert drv.find_element(By.ID, "decision").text == "Decision: rejected"
        items = [li.text for li in drv.find_elements(By.CSS_SELECTOR, "#recourse li")]
        assert items and all(t.split()[0] in ("raise", "lower", "change") and " from " in t for t in items)
        assert "epsilon 0.5" in drv.find_element(By.ID, "spent").text
        shot = Path(site["dir"]) / "page.png"
        drv.save_screenshot(str(shot))
        assert shot.stat().st_size > 1000
    finally:
        drv.quit()
