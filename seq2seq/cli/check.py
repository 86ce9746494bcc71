"""`seq2seq-check`: run the contract suite (`seq2seq.testing`) on one registered component.

    seq2seq-check score my_score --plugins ./lab/scores.py --config-dir lab/configs
    seq2seq-check region local --option window=3 --quick
    seq2seq-check decoder transformer --check incremental --check flops

Prints one row per check (result, seconds, what was verified or what went wrong) and exits
with 0 when every check passed, 1 when one failed, 2 when the component cannot be checked
at all (an unknown group or name, a plugin that does not import, a bad option). The
`--plugins` are imported first (paths relative to the current folder, as for
`seq2seq-train plugins=[...]`), so a plugin's component is found by its name; its YAML
preset comes from `--config-dir`. `--quick` leaves out the learning run (a few seconds).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from seq2seq import registry
from seq2seq.bounded_files import StructuredFileError, parse_yaml_text
from seq2seq.cli.checked_options import OneLineParser
from seq2seq.cli.common import one_line
from seq2seq.option_rules import OptionError
from seq2seq.plugins import PluginError, import_plugins
from seq2seq.testing import CHECKS, CheckResult, check_component, checks_of


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="seq2seq-check", description=__doc__.split("\n")[0])
    parser.add_argument("group", choices=list(CHECKS), help="the component's group")
    parser.add_argument("name", help="its registered name")
    parser.add_argument("--plugins", action="append", default=[], metavar="SPEC",
                        help="import this plugin first (seq2seq.plugins); repeatable")  # fmt: skip
    parser.add_argument("--config-dir", metavar="DIR",
                        help="a folder with its presets (DIR/attention/NAME.yaml)")  # fmt: skip
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option to check it with (a score's or region's; a part's "
                        "config key), the value read as YAML; repeatable")  # fmt: skip
    parser.add_argument("--check", action="append", default=[], metavar="CHECK",
                        help="run only this check (repeatable); default: all it owes")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="leave out the learning check")
    return parser


def parsed_options(parser: argparse.ArgumentParser, pairs: Sequence[str]) -> dict[str, Any]:
    options = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            parser.error(f"--option takes KEY=VALUE, got {pair!r}")
        try:
            options[key] = parse_yaml_text(value, source=f"--option {key}")
        except StructuredFileError as error:
            parser.error(str(error))
    return options


def chosen_checks(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, ...]:
    owed = checks_of(args.group, quick=args.quick)
    unknown = [check for check in args.check if check not in checks_of(args.group)]
    if unknown:
        parser.error(
            f"--check: a {args.group} owes {', '.join(checks_of(args.group))}; "
            f"got {', '.join(unknown)}"
        )
    return tuple(check for check in owed if check in args.check) if args.check else owed


def table(results: list[CheckResult]) -> str:
    """The results as aligned rows: check, result, seconds, detail."""
    width = max(len("check"), *(len(result.check) for result in results))
    rows = [f"{'check':<{width}}  result  seconds  detail"]
    for result in results:
        verdict = "ok" if result.passed else "FAILED"
        rows.append(
            f"{result.check:<{width}}  {verdict:<6}  {result.seconds:7.2f}  {result.detail}"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    options, checks = parsed_options(parser, args.option), chosen_checks(parser, args)
    try:
        import_plugins(args.plugins)
        component = registry.get(args.group, args.name)
        results = check_component(
            args.group, args.name, options=options, config_dir=args.config_dir, checks=checks
        )
    except (PluginError, registry.UnknownComponent, OptionError, FileNotFoundError,
            StructuredFileError) as error:  # fmt: skip
        print(f"seq2seq-check: {one_line(error)}", file=sys.stderr)
        return 2
    print(component.described)
    print(table(results))
    failed = [result for result in results if not result.passed]
    print(f"{len(results) - len(failed)} of {len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
