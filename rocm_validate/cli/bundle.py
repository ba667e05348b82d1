"""`rocm-validate bundle DIR`: save this node's GPU tool outputs in DIR, to attach to a ticket.

Runs amd-smi, rocminfo, rocm-smi and nvidia-smi (each with a timeout), saves what each printed
in a file named by the command, and DIR/bundle.json lists each command, how long it took and
what was missing or failed. `rocm-validate devices --from DIR` describes the node from the
folder anywhere, without torch or a GPU, from every output it holds: so DIR must be new or
empty, and a folder holding anything (another node's outputs) is refused. Exit status 0 when at
least one output was saved; 2 when none was, or when DIR cannot be used or written (one line,
no traceback).
"""

from __future__ import annotations

import argparse
import math
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
    parser.add_argument(
        "folder", metavar="DIR", type=Path, help="new or empty folder to save the outputs in (created if missing)"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="SECONDS", help="limit for each command (default: 60)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rocm_validate.platform import offline

    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise CommandError(f"--timeout needs a positive number of seconds, found {args.timeout:g}")
    _prepare(args.folder)
    try:
        records = offline.save_outputs(args.folder, timeout_s=args.timeout)
    except OSError as exc:
        raise CommandError(
            f"cannot write the bundle: {_reason(exc)}; {args.folder} now holds part of a bundle: remove it, "
            "then rerun naming a folder on a writable disk with space"
        ) from None
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


def _prepare(folder: Path) -> None:
    """Create `folder`, or accept it empty: `devices --from` describes every output a folder holds,
    so outputs already there (another node's, an older bundle's) would be described as this node."""
    if folder.exists() and not folder.is_dir():
        raise CommandError(f"{folder} is a file; name a new or empty folder to save the outputs in")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        held = sorted(entry.name for entry in folder.iterdir())
    except OSError as exc:
        raise CommandError(f"cannot use {folder}: {_reason(exc)}; name a folder you can write to") from None
    if held:
        shown = ", ".join(held[:4]) + (f" and {len(held) - 4} more" if len(held) > 4 else "")
        raise CommandError(
            f"{folder} already holds {shown}; `rocm-validate devices --from` would describe those together with "
            "this node's outputs: name a new or empty folder"
        )


def _reason(exc: OSError) -> str:
    """'/data/b/rocminfo.txt: No space left on device', from an OSError."""
    what = exc.strerror or str(exc)
    return f"{exc.filename}: {what}" if exc.filename else what
