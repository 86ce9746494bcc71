"""Load-test `seq2seq-serve` on loopback: throughput, latency, errors and peak memory.

    python scripts/serve_load.py RUN/checkpoints/best.pt --threads 2      # starts a server
    python scripts/serve_load.py --engine ctranslate2 OUT/ --threads 2
    python scripts/serve_load.py --url http://127.0.0.1:8000 -i test.zh   # a running one

Single-sentence requests at concurrency 1, 8 and 32 (`--concurrency`), each level bounded by
`--requests` and `--seconds`, the sentences from `--input` (one a line) or else the
built-in probe sentences of the model's language pair; prints a Markdown table
(`tools.serve_load`). A server this script starts listens on 127.0.0.1 and is stopped at
the end; `--url` accepts only a loopback address.
"""

from __future__ import annotations

import _workshop  # noqa: F401  (puts the repository root, and tools/, on sys.path)

# isort: split

import argparse
import os
import sys
from pathlib import Path

from seq2seq.cli.checked_options import OneLineParser, number, threads, whole
from seq2seq.config.search_settings import MAX_BEAM
from seq2seq.serve.process import ServerError, get_json, running_server
from seq2seq.text_encoding import TextEncodingError, decoded_text
from seq2seq.visualise.probes import probes_for
from tools.serve_load import LoadError, load_test, markdown_table


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("checkpoint", nargs="?", type=Path, help="serve this checkpoint (or export folder)")
    add("--url", help="load-test a server already running on loopback instead")
    add("--engine", choices=["pytorch", "ctranslate2"], default="pytorch")
    add("--threads", type=threads, help="the server's model threads (default: all cores)")
    add("--serve-option", action="append", default=[], metavar="OPTION",
        help="pass an option to seq2seq-serve, e.g. --serve-option=--max-batch=32")  # fmt: skip
    add("-i", "--input", type=Path, help="sentences, one a line (default: the probe sentences)")
    add("--concurrency", type=whole(1, 4096), nargs="+", default=[1, 8, 32])
    add(
        "--requests",
        type=whole(1, 10**7),
        default=200,
        help="requests per level at most (default 200)",
    )
    add(
        "--seconds",
        type=number(0, 24 * 3600, low_open=True),
        default=60.0,
        help="seconds per level at most (default 60)",
    )
    add("--beam-size", type=whole(1, MAX_BEAM), help="each request's beam (default: the server's)")
    return parser


def sentences_for(url: str, path: Path | None) -> list[str]:
    """The lines of `path`, or the probe sentences of the served model's pair."""
    if path is not None:
        try:  # a UTF-16 file (Notepad's "Unicode") is named, not sent as NUL-laden text
            text = decoded_text(path.read_bytes(), str(path))
        except (TextEncodingError, UnicodeDecodeError) as error:
            raise LoadError(f"--input: {error}") from error
        return [line.strip() for line in text.splitlines() if line.strip()]
    model = get_json(url + "/models")["models"][0]
    probes = probes_for(model["src_lang"], model["tgt_lang"])
    if not probes:
        raise LoadError(
            f"no probe sentences for {model['src_lang']}→{model['tgt_lang']}: give --input"
        )
    return [probe.source for probe in probes]


def measure(url: str, args: argparse.Namespace) -> str:
    options = {} if args.beam_size is None else {"beam_size": args.beam_size}
    sentences = sentences_for(url, args.input)
    summaries = load_test(url, sentences, args.concurrency, args.requests, args.seconds, options)
    model = get_json(url + "/models")["models"][0]
    heading = (f"`{model['name']}` ({model['engine']}), {len(sentences)} distinct sentences, "
               f"{os.cpu_count()} CPU cores, server threads {args.threads or 'default'}")  # fmt: skip
    return heading + "\n\n" + markdown_table(summaries)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.checkpoint is None) == (args.url is None):
        parser.error("give a CHECKPOINT to serve or the --url of a running server")
    try:
        if args.url is not None:
            print(measure(args.url.rstrip("/"), args))
            return 0
        serve = [str(args.checkpoint), "--engine", args.engine, *args.serve_option]
        serve += [] if args.threads is None else ["--threads", str(args.threads)]
        with running_server(serve) as server:
            print(measure(server.url, args))
        return 0
    except (LoadError, ServerError, OSError) as error:
        print(f"serve_load: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
