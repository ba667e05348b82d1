"""`rocm-validate bundle DIR`: save this node's GPU tool outputs in DIR, to attach to a ticket.

Runs amd-smi, rocminfo, rocm-smi and nvidia-smi (each with a timeout), saves what each printed
in a file named by the command, and DIR/bundle.json lists each command, how long it took and
what was missing or failed. `rocm-validate devices --from DIR` describes the node from the
folder anywhere, without torch or a GPU. Exit status 0 when at least one output was saved; 2
when none was (one line, no traceback).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rocm_validate.errors import CommandError


def add_parser(commands: Any) -> None:
    """Register the bundle subcommand on the rocm-validate parser."""
    parser = commands.add_parser(
        "bundle",
        help="save this node's GPU tool outputs in DIR for `rocm-validate devices --from DIR` and tickets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folder", metavar="DIR", type=Path, help="folder to save the outputs in (created if missing)")
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="limit for each command (default: 60)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rocm_validate.platform import offline

    if args.timeout <= 0:
        raise CommandError(f"--timeout needs a positive number of seconds, found {args.timeout:g}")
    if args.folder.exists() and not args.folder.is_dir():
        raise CommandError(f"{args.folder} is a file; name a folder to save the outputs in")
    records = offline.save_outputs(args.folder, timeout_s=args.timeout)
    for record in records:
        line = f"{record.status:8} {record.file:22} {record.command} ({record.seconds:.1f} s)"
        print(line + (f": {record.detail}" if record.status != "saved" and record.detail else ""))
    if not any(record.status == "saved" for record in records):
        tools = sorted({record.command.split()[0] for record in records if record.command})
        raise CommandError(
            f"no GPU tool printed anything ({', '.join(tools)}); {args.folder / offline.MANIFEST} says why"
        )
    print(f"saved in {args.folder}; describe it anywhere with: rocm-validate devices --from {args.folder}")
    return 0
