"""The PostgreSQL ledger: two ``serve`` processes spending one key's budget, against a real server in a temp dir.

Skips, with the reason, where PostgreSQL's ``initdb`` / ``pg_ctl`` or psycopg are missing (or
where the tests run as root without ``runuser`` to start PostgreSQL as another user).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import threading
import time

import pytest

from _service_util import BOUNDS, Server, applicant, free_port, tiny_dataset

pytest.importorskip("psycopg")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from recourse_privacy.service.bundle import publish  # noqa: E402
from recourse_privacy.service.keys import KeyStore, hash_key  # noqa: E402
from recourse_privacy.service.ledger import open_ledger  # noqa: E402

EPS = 0.5


def _pg_bin() -> str | None:
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True) + [""]:
        initdb = os.path.join(d, "initdb") if d else shutil.which("initdb")
        if initdb and os.path.exists(initdb):
            return os.path.dirname(initdb)
    return None


@pytest.fixture(scope="module")
def pg():
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (no initdb / pg_ctl)")
    prefix = []
    if os.geteuid() == 0:  # initdb refuses root
        if not shutil.which("runuser"):
            pytest.skip("running as root without runuser: PostgreSQL cannot be started")
        prefix = ["runuser", "-u", "nobody", "--"]
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp(prefix="rp-pg-"))  # not under pytest's 0700 tmp: PostgreSQL may run as nobody
    os.chmod(d, 0o777)
    data, port = d / "data", free_port()
    subprocess.run([*prefix, f"{bindir}/initdb", "-D", str(data), "-A", "trust", "-U", "rp"], check=True,
                   capture_output=True)  # fmt: skip
    opts = f"-p {port} -k {d} -c listen_addresses=127.0.0.1 -c fsync=on"
    subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", str(data), "-o", opts, "-l", str(d / "log"), "-w", "start"],
                   check=True, capture_output=True)  # fmt: skip
    yield f"postgresql://rp@127.0.0.1:{port}/postgres"
    subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def two_servers(pg, tmp_path_factory):
    d = tmp_path_factory.mktemp("pgserve")
    publish(tiny_dataset(300), method="laplace", epsilon=EPS, out=d / "b", bounds=BOUNDS)
    store = KeyStore(d / "k.json")
    keys = {"four": store.add("four", budget=4 * EPS), "load": store.add("load", budget=40 * EPS)}
    servers = [Server(d / "b", d / "k.json", pg) for _ in range(2)]
    yield servers, keys, pg
    for s in servers:
        s.kill()


def test_two_servers_share_one_budget_of_4_answers(two_servers):
    servers, keys, url = two_servers
    barrier = threading.Barrier(12)
    codes = []

    def run(i):
        with httpx.Client(timeout=60) as c:
            barrier.wait()
            r = c.post(servers[i % 2].url + "/v1/recourse", json={"applicant": applicant()},
                       headers={"X-API-Key": keys["four"]})  # fmt: skip
            codes.append(r.status_code)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] * 4 + [429] * 8
    acct = open_ledger(url).account(hash_key(keys["four"])[:16])
    assert acct.answers == 4 and acct.spent == pytest.approx(4 * EPS)


def test_kill_9_of_one_server_under_load(two_servers):
    servers, keys, url = two_servers
    key, kid = keys["load"], hash_key(keys["load"])[:16]
    received = []
    stop = threading.Event()

    def client(i):
        with httpx.Client(timeout=10) as c:
            while not stop.is_set():
                try:
                    r = c.post(servers[i % 2].url + "/v1/recourse", json={"applicant": applicant()},
                               headers={"X-API-Key": key})  # fmt: skip
                except httpx.HTTPError:
                    if i % 2 == 0:
                        return
                    continue
                if r.status_code == 429:
                    return
                if r.status_code == 200:
                    received.append(r.json()["epsilon_spent"])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    while len(received) < 10 and any(t.is_alive() for t in threads):
        time.sleep(0.005)
    servers[0].kill()  # SIGKILL mid-load; the other server goes on spending the same budget
    for t in threads:
        t.join(timeout=120)
    stop.set()
    acct = open_ledger(url).account(kid)
    assert acct.spent >= sum(received) - 1e-9 and acct.spent <= 40 * EPS + 1e-9 and acct.answers <= 40
