"""`seq2seq-serve`: translate over HTTP on this machine, with the attention viewer as its page.

* `limits`: what a request and the queue may hold, checked at start-up (`Limits`);
* `json_bodies`: the JSON of `POST /translate`, `GET /health` and `GET /models` (pydantic);
* `backends`: a loaded model behind one interface: the PyTorch `Translator` or a CTranslate2
  export (`TorchEngine`, `CTranslate2Engine`): translations, Pharaoh links, viewer views;
* `request_queue`: the bounded queue whose one worker thread merges the requests of many clients
  into batches and drops the work nobody awaits any more (`BatchQueue`);
* `hosts`: the names a request's `Host` may give (against DNS rebinding);
* `page`: the page at `/`, the attention viewer (`seq2seq.visualise.viewer`) with a text box;
* `app`: the FastAPI application over those (`create_app(engine, limits)`) and its OpenAPI
  schema (`api_schema`, kept in docs/guides/serving-openapi.json);
* `server`: uvicorn as the command runs it, with a deadline for every request's headers;
* `process`: a server in a subprocess on a free loopback port (the browser and load tests);

FastAPI and uvicorn are the optional extra `serve` (`pip install 'seq2seq-attention[serve]'`),
imported only by `app`, `server` and the command line; `limits`, `request_queue`, `hosts` and
`process` need the standard library alone. The load tester is workshop code
(`tools/serve_load.py`, run by `scripts/serve_load.py`).
"""

INSTALL_HINT = "pip install 'seq2seq-attention[serve]'"
