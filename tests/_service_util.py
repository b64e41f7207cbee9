"""Helpers of the service tests: a tiny mixed-type dataset, bundles, and a server started as a subprocess."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from recourse_privacy.data import Dataset

SRC = Path(__file__).resolve().parents[1] / "src"
BOUNDS = {"age": (18.0, 90.0), "hours": (0.0, 100.0), "income": (0.0, 250.0)}


def tiny_dataset(n: int = 600, seed: int = 0) -> Dataset:
    """Numeric (age increase-only, hours, income) and categorical (job; sex immutable) columns, a linear rule."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "age": rng.integers(18, 81, n).astype(float),
            "hours": rng.integers(0, 81, n).astype(float),
            "income": np.round(rng.uniform(0, 200, n), 3),
            "job": rng.choice(["clerk", "manager", "worker"], n).astype(object),
            "sex": rng.choice(["F", "M"], n).astype(object),
        }
    )
    logit = 0.08 * (X.hours - 40) + 0.03 * (X.income - 100) + 1.0 * (X.job == "manager") + rng.normal(0, 0.5, n)
    return Dataset(
        "tiny",
        X,
        (logit > 0).astype(int).to_numpy(),
        "y",
        categorical=("job", "sex"),
        immutable=("sex",),
        increasing=("age",),
    )


def gappy_dataset(n: int = 600, seed: int = 0) -> Dataset:
    """:func:`tiny_dataset` with hours missing in about 15% of the rows and job in about 10%."""
    ds = tiny_dataset(n, seed)
    rng = np.random.default_rng(seed + 1)
    X = ds.X.copy()
    X.loc[rng.random(n) < 0.15, "hours"] = np.nan
    X.loc[rng.random(n) < 0.10, "job"] = np.nan
    return dataclasses.replace(ds, X=X)


def publish_each(ds: Dataset, tmp_path_factory, prefix: str, **kw) -> dict:
    """One bundle of ``ds`` per published method (``recourse_privacy.service.bundle.METHODS``), each in a temporary
    directory named ``prefix + method``, with the public ``BOUNDS`` and 20 graph nodes: {method: path}."""
    from recourse_privacy.service.bundle import METHODS, publish

    out = {}
    for m in METHODS:
        path = tmp_path_factory.mktemp(f"{prefix}{m}")
        publish(ds, method=m, out=path, bounds=BOUNDS, n_clusters=20, **kw)
        out[m] = path
    return out


def applicant(**over) -> dict:
    """A rejected applicant in original units."""
    a = {"age": 30, "hours": 20, "income": 50.0, "job": "clerk", "sex": "F"}
    a.update(over)
    return a


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(SRC) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``recourse-privacy ARGS`` in a subprocess."""
    res = subprocess.run(
        [sys.executable, "-m", "recourse_privacy.cli", *args], capture_output=True, text=True, env=env(), timeout=300
    )
    if check and res.returncode != 0:
        raise AssertionError(f"recourse-privacy {' '.join(args)} exited {res.returncode}: {res.stderr}")
    return res


class Server:
    """``recourse-privacy serve`` as a subprocess in its own session (so kill -9 reaches its workers too)."""

    def __init__(self, bundle, keys, ledger, *, workers: int = 1, extra: tuple[str, ...] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = Path(bundle).parent / f"server.{self.port}.log"
        args = ["serve", str(bundle), "--port", str(self.port), "--api-keys", str(keys), "--ledger", str(ledger)]
        args += ["--workers", str(workers), "--compile-cache", str(Path(bundle).parent / "xla"), *extra]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "recourse_privacy.cli", *args],
            stdout=open(self.log, "w"),
            stderr=subprocess.STDOUT,
            env=env(),
            start_new_session=True,
        )
        self._wait()

    def _wait(self, timeout: float = 60.0) -> None:
        import httpx

        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited {self.proc.returncode}: {self.log.read_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()
        raise AssertionError(f"the server did not start in {timeout} s: {self.log.read_text()}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the server's process group (the uvicorn parent and its workers: all started by this test)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)


def headless_chromium():
    """A selenium driver of Debian's Chromium, headless, 900 x 1100; the test is skipped (saying what to install)
    without selenium, Chromium or chromedriver. The caller quits it."""
    import shutil

    import pytest

    webdriver = pytest.importorskip("selenium.webdriver")
    browser = next(
        (shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None
    )
    driver_bin = shutil.which("chromedriver")
    if browser is None or driver_bin is None:
        pytest.skip("no Chromium and chromedriver installed (Debian: apt install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=900,1100"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(driver_bin), options=opts)


def start_clients(client, url: str, received: list, until: int, n: int = 6):
    """Start ``n`` threads running ``client(url, stop, k)`` (k = 0 .. n - 1) and wait until ``received`` holds
    ``until`` items, every client has returned, or 60 s have passed; return ``(stop, threads)`` (still running)."""
    stop = threading.Event()
    threads = [threading.Thread(target=client, args=(url, stop, k)) for k in range(n)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    while len(received) < until and time.monotonic() - t0 < 60 and any(t.is_alive() for t in threads):
        time.sleep(0.005)
    return stop, threads
