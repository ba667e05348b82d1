"""The `rocm-validate` command: inspect devices, save a node's tool outputs, score results outside pytest,
merge a fleet's node reports."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rocm_validate import __version__
from rocm_validate.cli import bundle, devices, fleet, mlperf_score
from rocm_validate.errors import CommandError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocm-validate", description=__doc__)
    parser.add_argument("--version", action="version", version=f"rocm-validate {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    devices.add_parser(commands)
    bundle.add_parser(commands)
    mlperf_score.add_parser(commands)
    fleet.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except CommandError as exc:
        print(f"rocm-validate {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
