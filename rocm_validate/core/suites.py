"""The suites: their names and run order, which suite a test belongs to (its folder under
suites/, or its rocm_suite marker), and which suites a run selects (--rocm-suite)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

# In run order: preflight first (seconds long; a misconfigured host explains what follows).
SUITES: tuple[str, ...] = ("preflight", "correctness", "perf", "convergence", "collectives")
# Suites that measure the node as one group (every selected GPU together) rather than each GPU
# on its own: in a pinned-worker run their tests run once, after every GPU's own tests.
NODE_WIDE_SUITES: tuple[str, ...] = ("collectives",)
# Suites whose work runs in a GPU's beside lane in a whole-node run (rocm_validate.node.work):
# launch-bound, small in memory, timing nothing.
BESIDE_SUITES: tuple[str, ...] = ("convergence",)
# Suites that time the GPU: in the main lane they wait until the beside lane is done.
TIMING_SUITES: tuple[str, ...] = ("perf",)
# Suites whose metrics are gated against stored baselines (named in the command that records them).
BASELINE_SUITES: tuple[str, ...] = ("perf", "collectives")
SUITES_FOLDER = "suites"
RUN_LAST_MARKER = "rocm_run_last"  # a test that must see the whole run (the end-of-run RAS check)


def suite_from_path(path: Path, rootpath: Path) -> str | None:
    """'<rootdir>/suites/perf/test_gemm.py' -> 'perf'; anything else under the rootdir -> None. A
    path outside the rootdir (a run under another project's ini, `-c other.ini`) is judged by its
    folders' names: the innermost suites/<name>/ it lies in."""
    resolved = path.resolve()
    try:
        parts = resolved.relative_to(rootpath.resolve()).parts
    except ValueError:
        parts = resolved.parts
        starts = [i for i in range(len(parts) - 1) if parts[i] == SUITES_FOLDER and parts[i + 1] in SUITES]
        return parts[starts[-1] + 1] if starts else None
    if len(parts) >= 2 and parts[0] == SUITES_FOLDER and parts[1] in SUITES:
        return parts[1]
    return None


def suite_of_nodeid(nodeid: str, rootpath: Path) -> str | None:
    """'suites/perf/test_gemm.py::test_x[bf16]' -> 'perf' (by its file's folder, as suite_from_path)."""
    return suite_from_path(rootpath / nodeid.split("::", 1)[0], rootpath)


def suite_of(path: Path, rootpath: Path, marker_args: tuple[object, ...] | None) -> str | None:
    """The marker wins over the folder; raises ValueError for a marker naming no suite."""
    if marker_args is not None:
        if len(marker_args) != 1 or marker_args[0] not in SUITES:
            found = ", ".join(repr(a) for a in marker_args) or "nothing"
            raise ValueError(f"rocm_suite marker needs one of {', '.join(SUITES)}; found {found}")
        return str(marker_args[0])
    return suite_from_path(path, rootpath)


def touches_suites(args: list[str], invocation_dir: Path, rootpath: Path) -> bool:
    """Whether the paths pytest was asked to collect include (or lie inside) suites/."""
    suites_dir = (rootpath / SUITES_FOLDER).resolve()
    for arg in args:
        target = (invocation_dir / arg.split("::", 1)[0]).resolve()
        if suites_dir.is_dir() and (
            target == suites_dir or suites_dir in target.parents or target in suites_dir.parents
        ):
            return True
        if suite_from_path(target, rootpath) is not None or (target / SUITES_FOLDER).is_dir():
            return True  # outside the rootdir (`-c other.ini`): by the folders' names
    return False


def suites_named_by(args: list[str], invocation_dir: Path, rootpath: Path) -> set[str]:
    """The suites whose folders (or tests inside them) the command line names explicitly:
    `pytest suites/perf` or a perf test id selects the perf suite."""
    found = set()
    for arg in args:
        target = (invocation_dir / arg.split("::", 1)[0]).resolve()
        suite = suite_from_path(target, rootpath) if target != (rootpath / SUITES_FOLDER).resolve() else None
        if suite is not None:
            found.add(suite)
    return found


class Collected(Protocol):
    """What selection needs of a collected test (a pytest.Item)."""

    @property
    def nodeid(self) -> str: ...

    @property
    def path(self) -> Path: ...


def _names(arg: str, invocation_dir: Path, test: Collected) -> bool:
    """Whether a command-line argument (a folder, a file, or a test id) names `test`."""
    where, _, inside = arg.partition("::")
    target = (invocation_dir / where).resolve()
    path = test.path.resolve()
    if path != target and target not in path.parents:
        return False
    name = test.nodeid.split("::", 1)[1] if "::" in test.nodeid else ""
    return not inside or name == inside or name.startswith((inside + "[", inside + "::"))


def named_but_deselected(
    args: Sequence[str],
    invocation_dir: Path,
    selected: Sequence[Collected],
    deselected: Sequence[Collected],
    why: Mapping[str, str],
) -> str | None:
    """A usage error for a command-line argument whose every test the run's suite or level
    selection left out (pytest would end with exit status 5 and no reason), or None."""
    for arg in args:
        if any(_names(arg, invocation_dir, test) for test in selected):
            continue
        left_out = [test for test in deselected if _names(arg, invocation_dir, test)]
        if left_out:
            first = left_out[0]
            more = f" (and {len(left_out) - 1} more of its tests)" if len(left_out) > 1 else ""
            named = "" if first.nodeid.endswith(arg) else f" names no test this run selects: {first.nodeid}{more}"
            return f"{arg}{named}: {why[first.nodeid]}"
    return None


def run_order(suite: str | None, last: bool = False) -> int:
    """Where a test runs in the session: preflight first (a misconfigured host explains what
    follows), tests marked to run last (the end-of-run RAS check) after everything, the rest in
    collection order between them. A sort key; sorting is stable."""
    if last:
        return 2
    return 0 if suite == "preflight" else 1
