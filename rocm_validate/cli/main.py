"""The `rocm-validate` command: inspect devices and score results outside pytest."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from rocm_validate import __version__
from rocm_validate.cli import mlperf_score
from rocm_validate.errors import CommandError

Command = Callable[[argparse.Namespace], int]



def _devices(args: argparse.Namespace) -> int:
    from rocm_validate.platform.devices import discover_devices
    from rocm_validate.results import jsonfile
    from rocm_validate.results.report import (
        DEVICES_SCHEMA,
        device_summary,
        stack_summary,
    )

    devices = discover_devices()
    if args.json:
        data = {"schema": "rocm-validate/devices/1", "devices": [d.to_dict() for d in devices]}
        problems = jsonfile.schema_errors(data, DEVICES_SCHEMA)
        if problems:
            raise CommandError(f"device description breaks its schema: {'; '.join(problems)}")
        sys.stdout.write(jsonfile.dumps(data))
        return 0
    for device in devices:
        print(device_summary(device))
        print(f"    {stack_summary(device)}")
        details = [
            f"compute units {device.compute_units}" if device.compute_units else None,
            f"memory {device.memory_gib:.1f} GiB" if device.memory_gib else None,
            f"L2 {device.l2_cache_bytes // 1024**2} MiB" if device.l2_cache_bytes else None,
            f"attention {'/'.join(device.attention_backends)}",
        ]
        print("    " + ", ".join(d for d in details if d))
        for error in device.errors:
            print(f"    probe failed: {error}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocm-validate", description=__doc__)
    parser.add_argument("--version", action="version", version=f"rocm-validate {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    devices = commands.add_parser("devices", help="describe every GPU (and the CPU) this machine exposes")
    devices.add_argument("--json", action="store_true", help="print the description as JSON")
    devices.set_defaults(run=_devices)
    mlperf_score.add_parser(commands)
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
