"""Screenshot a run's TensorBoard page with headless Chromium (not run in CI).

    python scripts/tensorboard_screenshot.py outputs/default/2026-11-29_14-00-00 --out tb.png

How, and why the Chinese tags are legible: `seq2seq.visualise.screenshot`. Prints the PNG's
path. Needs Chromium (Debian: `apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from seq2seq.cli.checked_options import check_output_files
from seq2seq.visualise.screenshot import screenshot_run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path, help="a run folder (or any TensorBoard logdir)")
    parser.add_argument("--out", type=Path, default=Path("tensorboard.png"))
    parser.add_argument("--page", default="images", help="dashboard after '#' (images, scalars)")
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--window-size", default="1600,1400")
    parser.add_argument("--virtual-time-budget", type=int, default=15000, help="milliseconds")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_output_files(parser, ("--out", args.out))  # before Chromium starts
    if not Path(args.chromium).is_file():
        raise SystemExit(f"no Chromium at {args.chromium}: apt-get install chromium")
    if not args.run.is_dir():
        raise SystemExit(f"{args.run} is not a folder")
    screenshot_run(args.run, args.out, args.chromium, args.page, args.port, args.window_size,
                   args.virtual_time_budget)  # fmt: skip
    print(args.out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
