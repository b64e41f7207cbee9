"""The FastAPI application of ``recourse-privacy serve``.

Endpoints: ``POST /v1/recourse`` (``{"applicant": {...}}``), ``POST /v1/recourse/batch``
(``{"applicants": [...]}``, at most 1,000), ``GET /v1/manifest``, ``GET /v1/budget`` (the
caller's), ``GET /health``, ``GET /metrics`` (Prometheus) and the applicant page ``GET /``.

Order of checks on a recourse request: the body's size (over 1 MB: 413, counted on the bytes
received whatever Content-Length says), the key (``X-API-Key``: none or unknown or revoked:
401), the JSON and every applicant against the schema (422 naming the field, nothing spent),
then the spend: the whole request's epsilon and answers in one ledger transaction (refused:
429 naming the budget, the spent and the asked), and only then the answer (and its noise).

The two recourse endpoints are served by the outermost ASGI layer itself (no FastAPI routing or
model validation on the hot path): one worker-thread call per request reads the key, parses the
JSON, validates the applicants column by column (:meth:`Schema.parse_many`) and hands the spend
and the answer to a :class:`~recourse_privacy.service.ledger.GroupCommitter`, which records the
spends of the requests that arrive together in one transaction and answers them in one batched
pass; the response is compact JSON bytes.
Every answer is logged as one JSON line on the ``recourse_privacy.service.answers`` logger
(time, key name, answers, epsilon; the applicants only with ``log_applicants``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

import anyio
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response

from recourse_privacy.service.bundle import AnswerTexts, load_bundle
from recourse_privacy.service.keys import KeyStore, hash_key
from recourse_privacy.service.ledger import GroupCommitter, Refusal, SpendRequest, open_ledger
from recourse_privacy.service.page import render_page
from recourse_privacy.service.schema import ApplicantError, Applicants

__all__ = ["MAX_BATCH", "MAX_BODY", "app_from_env", "create_app"]

MAX_BODY = 1_000_000
MAX_BATCH = 1000
CONFIG_ENV = "RECOURSE_PRIVACY_SERVE_CONFIG"
answers_log = logging.getLogger("recourse_privacy.service.answers")


class _Keys:
    """The key file, re-read when it changes (checked at most once a second)."""

    def __init__(self, path: str | Path):
        self.store = KeyStore(path)
        self._stamp = None
        self._checked = 0.0
        self._lock = threading.Lock()
        self.by_hash = {}
        self._reload()

    def _reload(self) -> None:
        st = os.stat(self.store.path) if self.store.path.exists() else None
        stamp = None if st is None else (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self.by_hash = self.store.active()
            self._stamp = stamp

    def get(self, key: str | None):
        now = time.monotonic()
        if now - self._checked > 1.0:
            with self._lock:
                self._checked = now
                try:
                    self._reload()
                except Exception:  # noqa: BLE001 - a key file half-written by hand: keep the last good keys
                    logging.getLogger(__name__).exception("cannot re-read the key file")
        return self.by_hash.get(hash_key(key)) if key else None


class _Metrics:
    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("rp_requests", "HTTP requests", ["endpoint", "status"], registry=r)
        self.latency = Histogram(
            "rp_request_seconds",
            "request latency",
            ["endpoint"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.refusals = Counter("rp_refusals", "refused requests by reason", ["reason"], registry=r)
        self.answers = Counter("rp_answers", "applicants answered", registry=r)
        self.epsilon = Counter("rp_epsilon_spent", "epsilon spent by answers", registry=r)

    def render(self) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest

        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            reg = CollectorRegistry()
            multiprocess.MultiProcessCollector(reg)
            return generate_latest(reg)
        return generate_latest(self.registry)


def _error(status: int, message: str, **extra) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


class _Guard:
    """Outermost ASGI layer: 413 for a body over ``limit`` bytes, metrics, and a JSON 500 for a bug."""

    def __init__(self, app, limit: int, metrics: _Metrics, fast: dict | None = None):
        self.app, self.limit, self.metrics = app, limit, metrics
        self.fast = fast or {}  # POST path -> handler(headers, body) -> (status, JSON bytes), run in a thread

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        path = scope.get("path", "")
        endpoint = path if path in _ENDPOINTS else "other"
        status = {"code": 500}

        async def send_wrapped(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        async def reply(resp):
            await resp(scope, receive, send_wrapped)

        try:
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.limit):
                await reply(_error(413, f"the request body is over {self.limit} bytes"))
                return
            chunks, size, more = [], 0, True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.limit:
                    await reply(_error(413, f"the request body is over {self.limit} bytes"))
                    return
                chunks.append(chunk)
                more = message.get("more_body", False)
            body = b"".join(chunks)
            handler = self.fast.get(path) if scope.get("method") == "POST" else None
            if handler is not None:
                code, payload = await anyio.to_thread.run_sync(handler, scope.get("headers") or [], body)
                await reply(Response(payload, status_code=code, media_type="application/json"))
                return
            sent = {"done": False}

            async def replay():
                if not sent["done"]:
                    sent["done"] = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.app(scope, replay, send_wrapped)
        except Exception:  # noqa: BLE001 - a bug: logged, answered 500 as JSON, never a traceback to the client
            logging.getLogger(__name__).exception("internal error on %s", path)
            try:
                await reply(_error(500, "internal error (logged by the server)"))
            except Exception:  # noqa: BLE001 - the response had started
                pass
        finally:
            self.metrics.requests.labels(endpoint, str(status["code"])).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - t0)


_ENDPOINTS = {"/", "/health", "/metrics", "/v1/manifest", "/v1/budget", "/v1/recourse", "/v1/recourse/batch"}


def _dumps(doc) -> bytes:
    """Compact JSON bytes (refusing NaN: every number the service sends is finite)."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False, check_circular=False).encode()  # answers are trees


def _parse_json(body: bytes):
    def no_constant(name):
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(body, parse_constant=no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise ApplicantError("body", f"not valid JSON ({str(err)[:200]})") from None


class _Service:
    """What the endpoints share: the bundle, the keys, the ledger, the metrics and the group committer."""

    def __init__(self, bundle, keys, ledger, *, log_applicants: bool, max_batch: int):
        self.b, self.keys, self.led = bundle, keys, ledger
        self.metrics = _Metrics()
        self.eps_each = bundle.epsilon_per_answer
        self.log_applicants, self.max_batch = log_applicants, max_batch
        self.committer = GroupCommitter(ledger, self.answer_group)  # one noise stream, draws serialised by its lock

    def answer_group(self, payloads: list[Applicants]) -> list[AnswerTexts]:
        """The answers of a group of granted requests (JSON text, :meth:`Bundle.answer_json`): one batched pass, split
        back per request."""
        answers = self.b.answer_json(Applicants.concat(payloads))
        out, k = [], 0
        for p in payloads:
            out.append(AnswerTexts(answers.texts[k : k + len(p)], answers.decisions[k : k + len(p)]))
            k += len(p)
        return out

    def budget_doc(self, key, acct) -> dict:
        """GET /v1/budget's body (also in every answer)."""
        return {
            "key": key.name,
            "budget": key.budget,
            "spent": acct.spent,
            "remaining": max(key.budget - acct.spent, 0.0),
            "answers": acct.answers,
            "query_cap": key.query_cap,
            "epsilon_per_answer": self.eps_each,
        }

    def authorise(self, request: Request):
        """The caller's key, or None (counted as an auth refusal)."""
        key = self.keys.get(request.headers.get("x-api-key"))
        if key is None:
            self.metrics.refusals.labels("auth").inc()
        return key

    def parse(self, body: bytes, batch: bool) -> tuple[Applicants, list]:
        """The body's applicants, validated against the schema (an ApplicantError names the field)."""
        doc = _parse_json(body)
        field = "applicants" if batch else "applicant"
        if not isinstance(doc, dict):
            raise ApplicantError("body", f'must be a JSON object {{"{field}": ...}}')
        extra = sorted(set(doc) - {field})
        if extra:
            raise ApplicantError(extra[0], f'unknown field; the body is {{"{field}": ...}}')
        if field not in doc:
            raise ApplicantError(field, "missing")
        raw = doc[field]
        if not batch:
            return self.b.schema.parse_many([raw], "applicant", batch=False), [raw]
        if not isinstance(raw, list):
            raise ApplicantError("applicants", "must be a list of applicants")
        if not 1 <= len(raw) <= self.max_batch:
            raise ApplicantError("applicants", f"must hold 1 to {self.max_batch} applicants, got {len(raw)}")
        return self.b.schema.parse_many(raw, "applicants"), raw

    def recourse_request(self, headers: list, body: bytes, batch: bool) -> tuple[int, bytes]:
        """POST /v1/recourse[/batch], in a worker thread: key, JSON, schema, spend + answer (group commit)."""
        given = next((v for k, v in headers if k == b"x-api-key"), None)
        given = None if given is None else given.decode("latin-1")
        key = self.keys.get(given)
        metrics = self.metrics
        if key is None:
            metrics.refusals.labels("auth").inc()
            return 401, _dumps({"error": "missing X-API-Key header" if not given else "unknown or revoked API key"})
        try:
            apps, raw = self.parse(body, batch)
        except ApplicantError as err:
            metrics.refusals.labels("invalid").inc()
            return 422, _dumps({"error": str(err), "field": err.field})
        n, eps = len(apps), self.eps_each
        acct, answers = self.committer.submit(SpendRequest(key.id, eps, n, key.budget, key.query_cap), apps)
        if isinstance(acct, Refusal):
            metrics.refusals.labels(acct.reason).inc()
            return 429, _dumps(acct.to_dict())
        metrics.answers.inc(n)
        metrics.epsilon.inc(eps * n)
        record = {
            "time": time.time(),
            "key": key.name,
            "answers": n,
            "epsilon": eps * n,
            "decisions": answers.decisions,
        }
        if self.log_applicants:
            record["applicants"] = raw
        answers_log.info(_dumps(record).decode())
        # the answers' JSON text as the bundle wrote it, the request's fields after them: the same document as
        # _dumps({"answers": [...], "epsilon_spent": ..., "budget": ...}) (or one answer's fields and these two)
        tail = (
            ',"epsilon_spent":' + _dumps(eps * n).decode() + ',"budget":' + _dumps(self.budget_doc(key, acct)).decode()
        )
        if batch:
            return 200, ('{"answers":[' + ",".join(answers.texts) + "]" + tail + "}").encode()
        return 200, (answers.texts[0][:-1] + tail + "}").encode()


def _add_routes(api: FastAPI, svc: _Service) -> None:
    """The GET endpoints (the two POST ones are the guard's fast path; routed here so other methods get 405)."""
    manifest, page = svc.b.manifest, render_page(svc.b.manifest)

    @api.post("/v1/recourse")
    @api.post("/v1/recourse/batch")
    async def recourse_routes():
        return _error(500, "internal error: the recourse endpoints are served by the guard")

    @api.get("/v1/budget")
    async def budget(request: Request):
        key = svc.authorise(request)
        if key is None:
            msg = "missing X-API-Key header" if not request.headers.get("x-api-key") else "unknown or revoked API key"
            return _error(401, msg)
        acct = await run_in_threadpool(svc.led.account, key.id)
        return svc.budget_doc(key, acct)

    @api.get("/v1/manifest")
    async def get_manifest():
        return manifest

    @api.get("/health")
    async def health():
        doc = {"status": "ok", "method": svc.b.method}
        if hasattr(svc.b.graph, "precision"):  # DPC: what its compiled search runs in (serve --search-precision)
            doc["search_precision"] = svc.b.graph.precision
        return doc

    @api.get("/metrics")
    async def get_metrics():
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(svc.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @api.get("/", response_class=HTMLResponse)
    async def index():
        return HTMLResponse(page)


def create_app(
    bundle: str | Path,
    api_keys: str | Path,
    ledger: str | Path,
    *,
    log_applicants: bool = False,
    max_body: int = MAX_BODY,
    max_batch: int = MAX_BATCH,
    random_state=None,
    compile_cache: str | Path | None = None,
    search_precision: str = "float64",
):
    """The ASGI application serving ``bundle`` with the keys of ``api_keys`` and the spends in ``ledger``.

    ``compile_cache``: a directory for DPC's compiled searches (:func:`~recourse_privacy.service.latent_search.
    use_compile_cache`), so that a restarted server loads them instead of compiling; None compiles afresh.
    ``search_precision``: DPC's compiled search in ``float64`` (the default) or ``float32`` (:func:`load_bundle`)."""
    b = load_bundle(bundle, random_state=random_state, search_precision=search_precision)
    if compile_cache is not None and hasattr(b.graph, "warm"):
        from recourse_privacy.service.latent_search import use_compile_cache

        use_compile_cache(compile_cache)
    b.warm()  # compile DPC's search now, not in the first callers' time
    svc = _Service(b, _Keys(api_keys), open_ledger(ledger), log_applicants=log_applicants, max_batch=max_batch)
    api = FastAPI(title="recourse-privacy", version=b.manifest.get("recourse_privacy_version", ""), docs_url=None,
                  redoc_url=None, openapi_url=None)  # fmt: skip
    _add_routes(api, svc)
    fast = {
        "/v1/recourse": lambda headers, body: svc.recourse_request(headers, body, batch=False),
        "/v1/recourse/batch": lambda headers, body: svc.recourse_request(headers, body, batch=True),
    }
    return _Guard(api, max_body, svc.metrics, fast)


def app_from_env():
    """The application configured by ``$RECOURSE_PRIVACY_SERVE_CONFIG`` (JSON): uvicorn's factory for every worker."""
    cfg = json.loads(os.environ[CONFIG_ENV])
    log_file = cfg.pop("log_file", None)
    if log_file:
        handler = logging.FileHandler(log_file)
    else:
        handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    answers_log.addHandler(handler)
    answers_log.setLevel(logging.INFO)
    answers_log.propagate = False
    return create_app(**cfg)
