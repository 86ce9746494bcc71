"""The FastAPI application: `create_app(engine, limits)`.

    POST /translate   {"sentences": [...], "beam_size": 5, "nbest": 1,
                       "alignments": false, "attention": false}
    GET  /health      {"status": "ok", "queued": 0, "peak_rss_mib": ..., "limits": {...}}
    GET  /models      the loaded model: language pair, architecture, parameters, alignment head
    GET  /            the attention viewer with a text box (`seq2seq.serve.page`)

A translation request is read and checked here, then queued (`seq2seq.serve.batching`): the
one worker thread translates what is queued in batches, requests with the same search
settings together, and each request awaits its own answer. Every error is JSON
`{"error": "one line"}`: 400 for a body that is not JSON, 413 for a body larger than the
limits allow, 422 for a wrong type, an unknown key or a value over a limit, 503 when the
queue is full (or the service is stopping), 504 when the answer takes longer than
`timeout_s`, and 500 when the model fails on a request: the error is logged, only the
requests it concerns get the 500, and the service keeps serving. The interactive API pages
(`/docs`, `/redoc`) are off, since they load their scripts from a CDN; `/openapi.json` is on.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from seq2seq.decoding import SearchSettings, SearchSettingsError
from seq2seq.serve.batching import BatchQueue, QueueClosed, QueueFull
from seq2seq.serve.engine import BatchKey, Engine, sentence_results
from seq2seq.serve.limits import Limits, LimitsError, request_problem
from seq2seq.serve.page import page_html
from seq2seq.serve.schemas import (
    Health,
    ModelInfo,
    Models,
    Problem,
    TranslateRequest,
    TranslateResponse,
)

log = logging.getLogger(__name__)
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem} for status in (400, 413, 422, 500, 503, 504)
}


class RequestProblem(Exception):
    """A request the service answers with `status` and the one-line `message`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class Service:
    """The engine, its queue and what the routes answer."""

    def __init__(self, engine: Engine, limits: Limits, search: SearchSettings):
        if search.beam_size > limits.max_beam:
            raise LimitsError(
                "max_beam", f"must be at least the service's beam size {search.beam_size}"
            )
        self.engine, self.limits, self.search = engine, limits, search
        self.queue = BatchQueue(self._translate_batch, limits.max_queue, limits.max_batch,
                                limits.max_wait_ms / 1000)  # fmt: skip
        self.page = page_html(engine.viewer_base(), limits, search)
        self.model = ModelInfo(**engine.model_info())

    def _translate_batch(self, key: BatchKey, sentences: list[str]) -> list[dict[str, Any]]:
        return sentence_results(self.engine, key, self.search, sentences)

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

    async def translate(self, key: BatchKey, sentences: list[str]) -> list[dict[str, Any]]:
        """The answers of one request's sentences, from the worker; RequestProblem when the
        queue is full, the answer is late or the model failed."""
        try:
            future = self.queue.submit(key, sentences)
        except (QueueFull, QueueClosed) as error:
            raise RequestProblem(503, f"{error}; try again shortly") from None
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.limits.timeout_s)
        except asyncio.TimeoutError:
            raise RequestProblem(
                504, f"no translation within {self.limits.timeout_s:g} s"
            ) from None
        except Exception as error:  # logged by the worker
            message = (
                f"the model failed on this request ({type(error).__name__}: {first_line(error)})"
            )
            raise RequestProblem(500, message) from None

    def health(self) -> Health:
        limits = {name: float(value) for name, value in asdict(self.limits).items()}
        return Health(status="ok", engine=self.engine.name, queued=self.queue.depth,
                      peak_rss_mib=peak_rss_mib(), limits=limits)  # fmt: skip


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


async def read_body(request: Request, most: int) -> bytes:
    """The request body; RequestProblem 413 as soon as it is longer than `most` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > most:
        raise RequestProblem(413, f"the body has {declared} bytes; at most {most}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > most:
            raise RequestProblem(413, f"the body is longer than {most} bytes")
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


def problem_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(engine: Engine, limits: Limits, search: SearchSettings | None = None) -> FastAPI:
    """The service of one loaded engine (module docstring); `search` holds the settings a
    request does not give (default: `SearchSettings()`). LimitsError when its beam size is
    over `limits.max_beam`."""
    service = Service(engine, limits, search or SearchSettings())
    app = FastAPI(title="seq2seq-serve", lifespan=service.lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    add_error_handlers(app)
    add_routes(app, service)
    return app


def add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestProblem)
    async def request_problem_handler(request: Request, problem: RequestProblem):
        return problem_response(problem.status, problem.message)

    @app.exception_handler(HTTPException)
    async def http_problem_handler(request: Request, problem: HTTPException):
        return problem_response(problem.status_code, str(problem.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_handler(request: Request, problem: RequestValidationError):
        return problem_response(422, str(problem.errors()[0].get("msg", "invalid request")))


def add_routes(app: FastAPI, service: Service) -> None:
    schema = {"content": {"application/json": {"schema": TranslateRequest.model_json_schema()}}}

    @app.post("/translate", response_model=TranslateResponse, response_model_exclude_none=True,
              responses=ERRORS, openapi_extra={"requestBody": {**schema, "required": True}})  # fmt: skip
    async def translate(request: Request) -> dict[str, Any]:
        parsed = parsed_request(await read_body(request, service.limits.max_body_bytes))
        key = service.batch_key(parsed)
        results = await service.translate(key, parsed.sentences)
        return {"engine": service.engine.name, "beam_size": key.beam_size, "nbest": key.n_best,
                "translations": results}  # fmt: skip

    @app.get("/health", response_model=Health)
    async def health() -> Health:
        return service.health()

    @app.get("/models", response_model=Models)
    async def models() -> Models:
        return Models(models=[service.model])

    @app.get("/", response_class=HTMLResponse)
    async def page() -> HTMLResponse:
        return HTMLResponse(service.page)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(status_code=204)  # no icon; a browser asks for one
