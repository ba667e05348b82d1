"""`rocm-validate fleet REPORTS_OR_DIR...`: merge the per-node reports of a fleet into one answer.

Each node runs the suites with `--rocm-report=<shared folder>/<host>.json` (deploy/slurm,
deploy/kubernetes); this reads every report (files, or folders of `*.json`), names the nodes
whose report is missing or unusable, and writes the fleet report as JSON, markdown, JUnit (one
test case per node) and a drain list (one host per line). The verdict line says whether the image
regressed (roll back) or which nodes to drain.

Exit status 0 when every node passed, on one stack; 1 when a node is to be drained or rerun, the
image regressed, a report is missing, two reports claim one host or the stacks are mixed; 2 for a wrong request (no reports
found, an output that cannot be written), with one line and no traceback.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocm_validate.errors import CommandError, JsonFileError

PARALLEL_FROM = 64  # reports; fewer are read in this process (starting workers costs more)
OUTPUTS = {  # --out DIR writes these
    "json": "fleet.json",
    "markdown": "fleet.md",
    "junit": "fleet-junit.xml",
    "drain_list": "drain.txt",
}


def add_parser(commands: Any) -> None:
    """Register the fleet subcommand on the rocm-validate parser."""
    parser = commands.add_parser(
        "fleet",
        help="merge per-node reports (--rocm-report) into one fleet verdict: roll back the image, or drain nodes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "inputs", metavar="REPORTS_OR_DIR", nargs="+", type=Path, help="node reports, or folders of <host>.json reports"
    )
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help=f"write {', '.join(OUTPUTS.values())} into DIR (created if missing)"
    )
    for key, name in OUTPUTS.items():
        parser.add_argument(
            f"--{key.replace('_', '-')}", type=Path, metavar="PATH", help=f"write the {name} output to PATH instead"
        )
    parser.add_argument(
        "--expect",
        metavar="HOSTS",
        help="the hosts that should have reported: a file (one host per line), a folder (one file per host) or a "
        "comma-separated list; each one without a report is named and drained",
    )
    parser.add_argument(
        "--expect-count", type=int, metavar="N", help="how many nodes should have reported (names those it can)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(8, os.cpu_count() or 1),
        metavar="N",
        help="processes that read reports (default: the CPUs, at most 8)",
    )
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class Outputs:
    """Where each output goes (None: not written)."""

    json: Path | None = None
    markdown: Path | None = None
    junit: Path | None = None
    drain_list: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Outputs:
        """--out DIR's files, overridden one by one; every place checked writable before any report is read."""
        from rocm_validate.core.options import writable_folder_problem

        chosen: dict[str, Path] = {}
        for key, name in OUTPUTS.items():
            path = getattr(args, key) or (args.out / name if args.out else None)
            if path is None:
                continue
            path = path.expanduser()
            if path.is_dir():
                raise CommandError(f"--{key.replace('_', '-')} {path} is a folder; expected a file path")
            problem = writable_folder_problem(path.parent)
            if problem:
                raise CommandError(f"cannot write {path}: {problem}; choose a writable --out folder")
            same = next((k for k, other in chosen.items() if _resolved(other) == _resolved(path)), None)
            if same is not None:
                raise CommandError(
                    f"--{key.replace('_', '-')} {path} is also --{same.replace('_', '-')}: one output would overwrite "
                    "the other; give each output its own file"
                )
            chosen[key] = path
        return cls(**chosen)


def report_paths(inputs: Iterable[Path], outputs: Outputs | None = None) -> list[Path]:
    """The report files named, and every `*.json` entry directly in the folders named (a link to
    nothing or a loop of links too: the fleet names that node rather than dropping it), each once.
    An output that would be one of them, or written among them, is refused before anything is read:
    the fleet report is written beside the node reports, never over one."""
    found: dict[Path, None] = {}
    folders = []
    for item in inputs:
        if item.is_dir():
            folders.append(item)
            found.update(dict.fromkeys(sorted(p for p in item.glob("*.json") if not p.is_dir())))
        elif item.exists() or item.is_symlink():
            found[item] = None
        else:
            raise CommandError(f"{item}: no such file or folder; give node reports or folders of <host>.json reports")
    if outputs is not None:
        _refuse_outputs_among_reports(outputs, list(found), folders)
    if not found:
        raise CommandError(
            f"no reports (*.json) in {', '.join(str(i) for i in inputs)}; each node writes one with "
            "pytest --rocm-report=<folder>/<host>.json"
        )
    return list(found)


def _refuse_outputs_among_reports(outputs: Outputs, reports: list[Path], folders: list[Path]) -> None:
    """CommandError when an output is one of the reports or in a folder of reports (a node named
    'fleet' has the report fleet.json; a drain list among the reports is read by the next merge's
    glob if it ever ends in .json): outputs go beside the reports, e.g. --out <reports>/fleet."""
    read = {_resolved(p): p for p in reports}
    among = {_resolved(f): f for f in folders}
    for key in OUTPUTS:
        path = getattr(outputs, key)
        if path is None:
            continue
        option = f"--{key.replace('_', '-')}"
        if _resolved(path) in read:
            raise CommandError(
                f"{option} {path} is {read[_resolved(path)]}, a node report this merge reads; write the fleet "
                "report beside the node reports, e.g. --out <reports folder>/fleet"
            )
        folder = among.get(_resolved(path.parent))
        if folder is not None:
            raise CommandError(
                f"{option} {path} is in {folder}, the folder of node reports this merge reads (a node's report "
                f"could be that file); write the fleet report beside them, e.g. --out {folder / 'fleet'}"
            )


def _resolved(path: Path) -> Path:
    """`path` with its links followed as far as they go (a loop or a link to nothing stays as named)."""
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):
        return path.expanduser().absolute()


def expected_hosts(value: str | None) -> list[str]:
    """--expect: a file of hosts (one a line, '#' comments), a folder whose file names are hosts, or a
    list; each a host name the drain list can hold. Given but naming no host (an unset `$HOSTS`, an
    empty file) is a usage error: it would check nothing while seeming to."""
    from rocm_validate.fleet.reports import host_problem

    if value is None:
        return []
    path = Path(value).expanduser()
    if value.strip() and path.is_dir():
        hosts = sorted(p.name for p in path.iterdir() if not p.name.startswith("."))
    elif value.strip() and path.is_file():
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"--expect {path}: cannot be read ({exc})") from None
        hosts = [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]
        if not hosts:
            raise CommandError(f"--expect {path} names no host; expected one host per line")
    elif "/" in value:
        raise CommandError(f"--expect {value}: no such file or folder; give a hosts file, a folder or host1,host2")
    else:
        hosts = [host.strip() for host in value.split(",") if host.strip()]
        if not hosts:
            raise CommandError(
                f"--expect {value!r} names no host (an unset variable?); give a hosts file, a folder or host1,host2"
            )
    for host in hosts:
        problem = host_problem(host)
        if problem:
            raise CommandError(f"--expect {value}: {problem}")
    return hosts


def merge(paths: Iterable[Path], expect: Iterable[str] = (), expect_count: int | None = None, jobs: int = 1) -> Any:
    """The judged fleet from report files, each read and reduced to its summary at once; with
    `jobs` above one, by that many processes (reading JSON is most of a merge's time)."""
    from rocm_validate.fleet.judge import FleetBuilder
    from rocm_validate.fleet.reports import read_node

    builder = FleetBuilder()
    paths = list(paths)
    if jobs > 1 and len(paths) >= PARALLEL_FROM:
        with ProcessPoolExecutor(jobs) as pool:
            for node in pool.map(read_node, paths, chunksize=max(1, len(paths) // (8 * jobs))):
                builder.add(node)
    else:
        for path in paths:
            builder.add(read_node(path))
    unnamed = builder.expect(expect, expect_count)
    return builder.result(unnamed)


def run(args: argparse.Namespace) -> int:
    from rocm_validate.fleet import output
    from rocm_validate.results import jsonfile

    if args.expect_count is not None and args.expect_count < 1:
        raise CommandError(f"--expect-count {args.expect_count}: expected a number of nodes, 1 or more")
    outputs = Outputs.from_args(args)
    if args.jobs < 1:
        raise CommandError(f"--jobs {args.jobs}: expected a number of processes, 1 or more")
    fleet = merge(report_paths(args.inputs, outputs), expected_hosts(args.expect), args.expect_count, args.jobs)
    try:
        if outputs.json:
            jsonfile.write_json(outputs.json, output.to_dict(fleet), output.FLEET_SCHEMA)
        for path, text in (
            (outputs.markdown, output.markdown(fleet)),
            (outputs.junit, output.junit(fleet)),
            (outputs.drain_list, output.drain_list(fleet)),
        ):
            if path:
                _write_text(path, text)
    except (OSError, JsonFileError) as exc:
        raise CommandError(f"cannot write the fleet report: {exc}") from None
    written = [str(p) for p in (outputs.json, outputs.markdown, outputs.junit, outputs.drain_list) if p]
    print(output.headline(fleet))
    print(fleet.verdict)
    if written:
        print(f"rocm-validate fleet: wrote {', '.join(written)}")
    return fleet.exit_status


def _write_text(path: Path, text: str) -> None:
    """Written beside and renamed over, as every file of this project (a drain list read while it
    is written must never be half a list)."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
