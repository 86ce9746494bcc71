"""`seq2seq-serve`: translate over HTTP, with the attention viewer as the page at `/`.

    seq2seq-serve RUN/checkpoints/best.pt                  # http://127.0.0.1:8000/
    seq2seq-serve RUN/checkpoints/best.pt --port 8080 --beam-size 4 --threads 2
    seq2seq-serve --engine ctranslate2 OUT/                # a seq2seq-export folder
    curl -s 127.0.0.1:8000/translate -H 'Content-Type: application/json' \\
         -d '{"sentences": ["我爱中国。"], "alignments": true}'

`POST /translate`, `GET /health`, `GET /models` and the page: `seq2seq.serve.app`. The
checkpoint is loaded as `seq2seq-translate` loads it (`--plugins` the same); the search
options are the service's defaults, and a request may choose its own `beam_size` (up to
`--max-beam`) and `nbest`. The service listens on loopback (127.0.0.1) unless `--host` says
otherwise, and answers only requests whose `Host` is a loopback name, the `--host` address
or an `--allowed-host` name (`seq2seq.serve.hosts`). The limits (`--max-chars` ...
`--read-timeout-s`, `seq2seq.serve.limits`) are checked before the model is loaded. Needs the
`serve` extra: pip install 'seq2seq-attention[serve]'. Every problem with the options, the
port or the checkpoint is one error line and exit code 2.
"""

from __future__ import annotations

import argparse
import errno
import logging
import socket
import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import Any, get_type_hints

import torch

from seq2seq.checkpoint import CheckpointError
from seq2seq.cli.checked_options import OneLineParser, port, threads
from seq2seq.cli.common import checked_settings, one_line, search_arguments
from seq2seq.config.build import ConfigError
from seq2seq.plugins import PluginError, import_plugins
from seq2seq.quantization import QuantizationError
from seq2seq.serve import INSTALL_HINT
from seq2seq.serve.hosts import HostNameError, allowed_name, allowed_names
from seq2seq.serve.limits import Limits, LimitsError

PROGRAM = "seq2seq-serve"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
SECURITY = """\
security: the service is meant for one machine. It answers only requests whose Host header
is a loopback name, the --host address or an --allowed-host name (against DNS rebinding),
reads JSON only when sent as application/json (415 otherwise), drops the work of clients
that hang up or run out of --timeout-s, and closes connections whose headers or body take
longer than --read-timeout-s. It has no TLS, no authentication and no rate limits: to serve
other machines, put it behind a reverse proxy (nginx, Caddy) that has them and keep it on
127.0.0.1 (docs/guides/serving.md, Security)."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROGRAM, description=__doc__.split("\n")[0], epilog=SECURITY,
                           formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    search_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")  # fmt: skip
    parser.add_argument(
        "--allowed-host", action="append", default=[], type=allowed_host, metavar="NAME",
        help="also answer requests whose Host header is NAME, with any port (repeatable; "
        "default: only localhost, 127.0.0.1, ::1 and the --host address)",
    )  # fmt: skip
    parser.add_argument("--port", type=port, default=8000, help="port (default %(default)s)")
    parser.add_argument(
        "--engine", choices=["pytorch", "ctranslate2"], default="pytorch",
        help="pytorch: the checkpoint with the project's search; ctranslate2: CHECKPOINT is "
        "a seq2seq-export folder (default %(default)s)",
    )  # fmt: skip
    parser.add_argument("--threads", type=threads, help="CPU threads for the model (default: all)")
    parser.add_argument("--access-log", action="store_true", help="log every request")
    limit_arguments(parser)
    return parser


def allowed_host(text: str) -> str:
    """An `--allowed-host` name (`seq2seq.serve.hosts.allowed_name`)."""
    try:
        return allowed_name(text)
    except HostNameError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def limit_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per `Limits` field: `--max-chars` for `max_chars`, with its default."""
    types = get_type_hints(Limits)
    for limit in fields(Limits):
        parser.add_argument(
            "--" + limit.name.replace("_", "-"), type=types[limit.name], default=limit.default,
            help=f"{limit.metadata['help']} (default %(default)s)",
        )  # fmt: skip


def checked_limits(
    parser: argparse.ArgumentParser, args: argparse.Namespace, beam_size: int
) -> Limits:
    """The limits of the options, or one error line and exit code 2."""
    options = vars(args)
    try:
        limits = Limits(**{limit.name: options[limit.name] for limit in fields(Limits)})
    except LimitsError as error:
        parser.error(f"--{error.name.replace('_', '-')} {error.problem}")
    if beam_size > limits.max_beam:
        parser.error(f"--beam-size {beam_size} is over --max-beam {limits.max_beam}")
    return limits


def check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One error line for a port, thread count or option mix that cannot work."""
    if not 1 <= args.port <= 65535:
        parser.error(f"--port {args.port}: give a port from 1 to 65535")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads {args.threads}: give at least 1")
    if args.engine == "ctranslate2" and args.plugins:
        parser.error("--plugins needs --engine pytorch (an export holds no plugin code)")
    problem = port_problem(args.host, args.port)
    if problem is not None:
        parser.error(problem)


def port_problem(host: str, port: int) -> str | None:
    """Why the service could not listen on host:port (checked before loading the model)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        return f"--host {host}: {error.strerror}"
    except (UnicodeError, ValueError) as error:  # an empty or overlong label: IDNA refuses it
        return f"--host {host!r} is not a host name or an address ({error})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            taken = error.errno == errno.EADDRINUSE
            reason = "the port is in use" if taken else (error.strerror or str(error))
            return f"--host {host} --port {port}: {reason}"
    return None


def load_engine(args: argparse.Namespace) -> Any:
    """The engine of the checkpoint (or export folder); None after one error line."""
    from seq2seq.export import ExportError
    from seq2seq.serve.backends import CTranslate2Engine, TorchEngine

    try:
        if args.engine == "ctranslate2":
            from seq2seq.export.ctranslate2_translator import CTranslate2Translator

            translator = CTranslate2Translator.load(
                args.checkpoint, args.device, args.threads, args.quantization
            )
            return CTranslate2Engine(translator, args.checkpoint)
        import_plugins(args.plugins)
        from seq2seq.search.translator import Translator

        translator = Translator.load(args.checkpoint, args.device, args.quantization or "float32")
        return TorchEngine(translator, args.checkpoint)
    except (CheckpointError, ConfigError, PluginError, ExportError, QuantizationError) as error:
        print(f"{PROGRAM}: {one_line(error)}", file=sys.stderr)
        return None


def missing_extra() -> str | None:
    """One line naming what to install when FastAPI or uvicorn is missing; else None."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        return f"{PROGRAM}: {error.name or 'fastapi'} is not installed: {INSTALL_HINT}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = checked_settings(parser, args)
    limits = checked_limits(parser, args, settings.beam_size)
    check_options(parser, args)
    missing = missing_extra()
    if missing is not None:
        print(missing, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    engine = load_engine(args)
    if engine is None:
        return 2
    return serve(engine, limits, settings, args)


def serve(engine: Any, limits: Limits, settings: Any, args: argparse.Namespace) -> int:
    import uvicorn

    from seq2seq.serve.app import create_app
    from seq2seq.serve.server import server_config

    if args.host not in LOOPBACK:
        print(f"{PROGRAM}: warning: --host {args.host} is reachable from other machines, "
              "without TLS or authentication; see the Security section of the serving guide",
              file=sys.stderr)  # fmt: skip
    app = create_app(engine, limits, settings, allowed_names(args.host, args.allowed_host))
    server = uvicorn.Server(server_config(app, args.host, args.port, limits, args.access_log))
    try:
        server.run()
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        pass
    return 0 if server.started else 2


if __name__ == "__main__":
    sys.exit(main())
