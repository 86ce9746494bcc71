"""The FastAPI application: `create_app(engine, limits)`.

    POST /translate   {"sentences": [...], "beam_size": 5, "nbest": 1,
                       "alignments": false, "attention": false}
    GET  /health      {"status": "ok", "queued": 0, "peak_rss_mib": ..., "limits": {...}}
    GET  /models      the loaded model: language pair, architecture, parameters, alignment head
    GET  /            the attention viewer with a text box (`seq2seq.serve.page`)

Each translation says whether its source was cut to the model's limit (`truncated`, with
the pieces given and kept) and carries the warnings its writer should read (`warnings`: the
cut, a sentence hardly in the script of the model's source language); `/health` gives the
service's limits and the model's piece limit. The answers' types are pydantic models
(`seq2seq.serve.json_bodies`); `api_schema` is the OpenAPI schema FastAPI writes of them,
which docs/guides/serving-openapi.json keeps a copy of (`python -m seq2seq.serve.app` prints
it; a test checks the copy).

A translation request is read and checked here, then queued (`seq2seq.serve.request_queue`): the
one worker thread translates what is queued in batches, requests with the same search
settings together, and each request awaits its own answer. Every error is JSON
`{"error": "one line"}`: 400 for a body that is not JSON or a `Host` the service does not
answer to (`seq2seq.serve.hosts`), 408 for a body that takes longer than `read_timeout_s`
to arrive, 413 for a body larger than the limits allow, 415 for a body not sent as
`application/json`, 422 for a wrong type, an unknown key or a value over a limit, 503 when
the queue is full (or the service is stopping), 504 when the translation takes longer than
`timeout_s`, and 500 when the model fails on a request: the error is logged, only the
requests it concerns get the 500, and the service keeps serving.

Nobody's work is done for nothing: a request past `timeout_s` and a client that hangs up
while it waits (its connection's `http.disconnect`) withdraw their job, so that its queued
sentences leave the queue and the worker stops translating it before its next chunk of at
most `CHUNK_HYPOTHESES` hypotheses (sentences × beam). A client that hangs up, before its
body ended or while it waited, is one INFO line in the log. The interactive API pages
(`/docs`, `/redoc`) are off, since they load their scripts from a CDN; `/openapi.json` is on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import resource
import sys
import time
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from seq2seq.config.search_settings import SearchSettings, SearchSettingsError
from seq2seq.serve.backends import BatchKey, Engine, sentence_results
from seq2seq.serve.hosts import LOOPBACK_NAMES, header_host
from seq2seq.serve.json_bodies import (
    Health,
    ModelInfo,
    Models,
    Problem,
    ServiceLimits,
    TranslateRequest,
    TranslateResponse,
)
from seq2seq.serve.limits import Limits, LimitsError, request_problem
from seq2seq.serve.page import page_html
from seq2seq.serve.request_queue import BatchQueue, DeadlinePassed, Job, QueueClosed, QueueFull

log = logging.getLogger(__name__)
TITLE = "seq2seq-serve"
SUMMARY = (
    "Translate sentences with a seq2seq checkpoint (or a CTranslate2 export of one), with "
    "word links and attention on request; the page at / shows the attention."
)
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem} for status in (400, 408, 413, 415, 422, 500, 503, 504)
}
# The worker translates a group of requests in chunks of at most this many hypotheses
# (sentences × beam, and at most the search's batch size), and drops the requests nobody
# awaits any more between two chunks.
CHUNK_HYPOTHESES = 256
JSON_CHARSETS = {"utf-8", "utf8"}
CLIENT_CLOSED = 499  # never sent: the client is gone (nginx's code, for the access log)


class RequestProblem(Exception):
    """A request the service answers with `status` and the one-line `message`; `close`:
    end the connection after the answer (what remains of the request is not read)."""

    def __init__(self, status: int, message: str, close: bool = False):
        super().__init__(message)
        self.status, self.message, self.close = status, message, close


class ClientGone(Exception):
    """The client hung up; logged by the route, answered to nobody."""


class Service:
    """The engine, its queue and what the routes answer."""

    def __init__(self, engine: Engine, limits: Limits, search: SearchSettings):
        if search.beam_size > limits.max_beam:
            raise LimitsError(
                "max_beam", f"must be at least the service's beam size {search.beam_size}"
            )
        self.engine, self.limits, self.search = engine, limits, search
        self.queue = BatchQueue(self._translate_batch, limits.max_queue, limits.max_batch,
                                limits.max_wait_ms / 1000, self.chunk_size)  # fmt: skip
        self.model = ModelInfo(**engine.model_info())
        self.page = page_html(engine.viewer_base(), limits, search, self.model.max_source_pieces)

    def _translate_batch(self, key: BatchKey, sentences: list[str]) -> list[dict[str, Any]]:
        return sentence_results(self.engine, key, self.search, sentences)

    def chunk_size(self, key: BatchKey) -> int:
        """Sentences the worker translates between two looks at who still awaits them."""
        return max(1, min(self.search.batch_size, CHUNK_HYPOTHESES // key.beam_size))

    @asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        self.queue.start()
        yield
        await asyncio.to_thread(self.queue.stop, self.limits.timeout_s)

    def batch_key(self, request: TranslateRequest) -> BatchKey:
        """The request's search settings; RequestProblem 422 when it cannot be served."""
        beam = self.search.beam_size if request.beam_size is None else request.beam_size
        nbest = self.search.n_best if request.nbest is None else request.nbest
        problem = request_problem(request.sentences, beam, self.limits)
        if problem is None and request.alignments and self.engine.links_problem:
            problem = f"alignments: {self.engine.links_problem}"
        if problem is None and request.attention and self.engine.attention_problem:
            problem = f"attention: {self.engine.attention_problem}"
        if problem is None:
            problem = settings_problem(self.search, beam, nbest)
        if problem is not None:
            raise RequestProblem(422, problem)
        return BatchKey(beam, nbest, request.alignments, request.attention)

    async def translate(
        self, request: Request, key: BatchKey, sentences: list[str]
    ) -> list[dict[str, Any]]:
        """The answers of one request's sentences, from the worker; RequestProblem when the
        queue is full, the answer is late or the model failed, ClientGone when the client
        hung up. Whatever ends the wait, the job is withdrawn unless it was answered."""
        timeout = self.limits.timeout_s
        try:
            job = self.queue.submit(key, sentences, time.monotonic() + timeout)
        except (QueueFull, QueueClosed) as error:
            raise RequestProblem(503, f"{error}; try again shortly") from None
        try:
            return await self._answer(request, job)
        except ClientGone:
            dropped = self.queue.withdraw(job)
            log.info("%s hung up while it waited; %d of its %d sentence(s) dropped",
                     client_name(request), dropped, len(sentences))  # fmt: skip
            raise
        finally:
            self.queue.withdraw(job)  # late, or the server is stopping; nothing once answered

    async def _answer(self, request: Request, job: Job) -> list[dict[str, Any]]:
        """The job's results once the worker is done, unless the deadline passes or the
        client hangs up first."""
        answer = asyncio.wrap_future(job.future)
        hang_up = asyncio.ensure_future(disconnected(request.receive))
        try:
            await asyncio.wait((answer, hang_up), timeout=self.limits.timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        finally:
            hang_up.cancel()
        if answer.done():
            return answer_results(answer, self.limits.timeout_s)
        answer.cancel()
        if hang_up.done() and not hang_up.cancelled():
            hang_up.exception()  # a receive that failed: the connection is gone all the same
            raise ClientGone()
        raise RequestProblem(504, late_message(self.limits.timeout_s))

    def health(self) -> Health:
        limits = ServiceLimits(
            **asdict(self.limits), max_source_pieces=self.model.max_source_pieces
        )
        counts = self.queue.counts
        return Health(status="ok", engine=self.engine.name, queued=self.queue.depth,
                      sentences_translated=counts.processed, sentences_dropped=counts.dropped,
                      peak_rss_mib=peak_rss_mib(), limits=limits)  # fmt: skip


async def disconnected(receive: Receive) -> None:
    """Returns once the client has hung up (its body was read before: the next message
    of the connection is `http.disconnect`)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def answer_results(answer: asyncio.Future, timeout_s: float) -> list[dict[str, Any]]:
    """The results of a finished job; RequestProblem 504 or 500 when it has none."""
    error = answer.exception()
    if error is None:
        return answer.result()
    if isinstance(error, DeadlinePassed):
        raise RequestProblem(504, late_message(timeout_s))
    message = f"the model failed on this request ({type(error).__name__}: {first_line(error)})"
    raise RequestProblem(500, message)  # logged by the worker


def late_message(timeout_s: float) -> str:
    return f"no translation within {timeout_s:g} s"


def client_name(request: Request) -> str:
    """`client 127.0.0.1:52814`, for the log."""
    client = request.client
    return "a client" if client is None else f"client {client.host}:{client.port}"


def settings_problem(base: SearchSettings, beam: int, nbest: int) -> str | None:
    """What is wrong with a request's beam and n-best, in the request's own key names."""
    try:
        BatchKey(beam, nbest, False, False).settings(base)
    except SearchSettingsError as error:
        name = "nbest" if error.field == "n_best" else error.field
        return f"{name} {error.problem}"
    return None


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "no message"


def peak_rss_mib() -> float | None:
    """This process's peak resident memory in MiB (Linux and macOS), else None."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def content_type_problem(value: str | None) -> str | None:
    """Why a `Content-Type` is not JSON the service reads (`application/json`, UTF-8 if a
    charset is given), or None. A web page can send `text/plain` to any address without
    asking it first (no CORS preflight); `application/json` it cannot."""
    media, _, parameters = (value or "").partition(";")
    shown = repr(value[:60]) if value else "none"
    if media.strip().lower() != "application/json":
        return f"send the body as Content-Type: application/json (got {shown})"
    for parameter in parameters.split(";"):
        name, _, given = parameter.partition("=")
        charset = given.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in JSON_CHARSETS:
            return f"send the body as UTF-8 JSON (got {shown})"
    return None


async def read_body(request: Request, most: int, seconds: float) -> bytes:
    """The request body; RequestProblem 415 for one that is not JSON, 413 as soon as it is
    longer than `most` bytes, 408 when it has not all arrived within `seconds`; ClientGone
    when the client hangs up before its end."""
    problem = content_type_problem(request.headers.get("content-type"))
    if problem is not None:
        raise RequestProblem(415, problem, close=True)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > most:
        raise RequestProblem(413, f"the body has {declared} bytes; at most {most}", close=True)
    try:
        return await asyncio.wait_for(body_bytes(request, most), seconds)
    except asyncio.TimeoutError:
        late = f"the body did not arrive within {seconds:g} s"
        raise RequestProblem(408, late, close=True) from None
    except ClientDisconnect:
        log.info("%s hung up before its request body ended", client_name(request))
        raise ClientGone() from None


async def body_bytes(request: Request, most: int) -> bytes:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > most:
            raise RequestProblem(413, f"the body is longer than {most} bytes", close=True)
    return bytes(body)


def parsed_request(body: bytes) -> TranslateRequest:
    """The request of a JSON body; RequestProblem 400 (not JSON) or 422 (wrong shape)."""
    try:
        return TranslateRequest.model_validate_json(body)
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            raise RequestProblem(400, f"the body is not valid JSON ({first['msg']})") from None
        raise RequestProblem(422, validation_message(error)) from None


def validation_message(error: ValidationError) -> str:
    """`beam_size: Input should be a valid integer` (and how many more problems)."""
    problems = error.errors()
    first = problems[0]
    place = ".".join(str(part) for part in first["loc"]) or "body"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{place}: {first['msg']}{more}"


def problem_response(status: int, message: str, close: bool = False) -> JSONResponse:
    headers = {"Connection": "close"} if close else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class HostCheck:
    """ASGI middleware: 400 with a JSON one-line error for an HTTP request whose `Host`
    header names none of `allowed` (`seq2seq.serve.hosts`). Starlette's TrustedHostMiddleware
    would answer in plain text, unlike every other error of the service, and compares IPv6
    addresses as written (`[0:0:0:0:0:0:0:1]` is not `[::1]`), hence this."""

    def __init__(self, app: ASGIApp, allowed: Collection[str]):
        self.app, self.allowed = app, frozenset(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = self.host_problem(scope)
        if problem is not None:
            await problem_response(400, problem, close=True)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def host_problem(self, scope: Scope) -> str | None:
        """Why the request names no host the service answers to, or None. Exactly one
        `Host` header (RFC 9112 3.2: a 400 otherwise, since a proxy and this service could
        read different ones); an absolute-form target (`POST http://name/translate`) names
        its host instead of the header (RFC 9112 3.2.2), and is rewritten to its path."""
        values = [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"host"]
        if len(values) > 1:
            return f"the request has {len(values)} Host headers; send exactly one"
        value = values[0] if values else ""
        authority = absolute_authority(scope)
        if authority is not None:
            value = authority
        if header_host(value) in self.allowed:
            return None
        shown = repr(value[:80]) if value else "missing"
        return (f"the Host header ({shown}) names no host this service answers to; "
                "start it with --allowed-host NAME to add one")  # fmt: skip


_ABSOLUTE = re.compile(r"(?i)https?://([^/?#]*)(.*)")


def absolute_authority(scope: Scope) -> str | None:
    """The authority of an absolute-form request target (`http://localhost:8000/health` →
    `localhost:8000`), with `scope` rewritten in place to its path; None for a path."""
    found = _ABSOLUTE.fullmatch(scope.get("path", ""))
    if found is None:
        return None
    authority, path = found.group(1), found.group(2) or "/"
    scope["path"], scope["raw_path"] = path, path.encode("latin-1", "replace")
    return authority  # one with user information (`localhost@evil`) is no host name


def create_app(
    engine: Engine, limits: Limits, search: SearchSettings | None = None,
    allowed_hosts: Collection[str] = LOOPBACK_NAMES,
) -> FastAPI:  # fmt: skip
    """The service of one loaded engine (module docstring); `search` holds the settings a
    request does not give (default: `SearchSettings()`), `allowed_hosts` the names a
    request's `Host` may give (`seq2seq.serve.hosts.allowed_names`; default: loopback).
    LimitsError when its beam size is over `limits.max_beam`."""
    service = Service(engine, limits, search or SearchSettings())
    app = bare_app(service.lifespan)
    app.state.service = service
    app.add_middleware(HostCheck, allowed=allowed_hosts)
    return app


def bare_app(lifespan: Any = None) -> FastAPI:
    """The routes and error answers, without a service yet (the routes read it from
    `app.state.service`), and without the interactive pages, which load from a CDN."""
    app = FastAPI(title=TITLE, summary=SUMMARY, lifespan=lifespan, docs_url=None, redoc_url=None)
    add_error_handlers(app)
    add_routes(app)
    return app


def api_schema() -> dict[str, Any]:
    """The service's OpenAPI schema, as `/openapi.json` serves it; it needs no model."""
    return bare_app().openapi()


def api_schema_text() -> str:
    """`api_schema` as the documentation keeps it: indented JSON, one final newline."""
    return json.dumps(api_schema(), indent=2, ensure_ascii=False) + "\n"


def add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestProblem)
    async def request_problem_handler(request: Request, problem: RequestProblem):
        return problem_response(problem.status, problem.message, problem.close)

    @app.exception_handler(ClientGone)
    async def client_gone_handler(request: Request, problem: ClientGone):
        return Response(status_code=CLIENT_CLOSED)  # logged already; nobody reads it

    @app.exception_handler(HTTPException)
    async def http_problem_handler(request: Request, problem: HTTPException):
        return problem_response(problem.status_code, str(problem.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_handler(request: Request, problem: RequestValidationError):
        return problem_response(422, str(problem.errors()[0].get("msg", "invalid request")))


def add_routes(app: FastAPI) -> None:
    """The routes; each reads the service from `app.state.service`."""
    schema = {"content": {"application/json": {"schema": TranslateRequest.model_json_schema()}}}

    @app.post("/translate", response_model=TranslateResponse, response_model_exclude_none=True,
              responses=ERRORS, openapi_extra={"requestBody": {**schema, "required": True}})  # fmt: skip
    async def translate(request: Request) -> dict[str, Any]:
        service: Service = request.app.state.service
        limits = service.limits
        body = await read_body(request, limits.max_body_bytes, limits.read_timeout_s)
        parsed = parsed_request(body)
        key = service.batch_key(parsed)
        results = await service.translate(request, key, parsed.sentences)
        return {"engine": service.engine.name, "beam_size": key.beam_size, "nbest": key.n_best,
                "translations": results}  # fmt: skip

    @app.get("/health", response_model=Health)
    async def health(request: Request) -> Health:
        return request.app.state.service.health()

    @app.get("/models", response_model=Models)
    async def models(request: Request) -> Models:
        return Models(models=[request.app.state.service.model])

    @app.get("/", response_class=HTMLResponse)
    async def page(request: Request) -> HTMLResponse:
        return HTMLResponse(request.app.state.service.page)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(status_code=204)  # no icon; a browser asks for one


if __name__ == "__main__":
    sys.stdout.write(api_schema_text())  # the copy in docs/guides/serving-openapi.json
