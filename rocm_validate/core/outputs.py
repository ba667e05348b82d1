"""The files a run writes at its end (--rocm-report, --rocm-summary, pytest's --junitxml, a suite's
own such as --rocm-benchmark-json): claimed at its start, written at its end, never left stale or
half written.

* At the start, before any other option can stop the run, each is proven writable by creating and
  removing a file beside it, and an old file there is removed: a run that stops on a usage error,
  or is killed, never leaves last week's "passed" behind. The summary is appended to (a CI step
  summary such as $GITHUB_STEP_SUMMARY collects every step's), so it is kept. Two outputs never
  share a file, and a device or a pipe (/dev/stdout) is never removed or replaced.
* At the end each is written whole or not at all (`append_text`; JSON through `jsonfile`). A write
  that still fails is one line saying which file and why; the run's exit status stays its tests'.
* A run that stopped before its end (a usage error, an internal error) appends to the summary what
  stopped it (`note_stop`), so the page people read never shows an older run's heading last.

Only the process that writes them (a plain run, or pytest-xdist's controller) claims and writes.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rocm_validate.core.options import (
    REPORT,
    SUMMARY,
    OptionSpec,
    empty_value_problem,
    given_path,
    raw_value,
    source_name,
    writable_folder_problem,
)
from rocm_validate.core.session import STATE_KEY, is_xdist_worker, run_state
from rocm_validate.errors import DataFileError, UsageError

JUNIT_FLAG = "--junitxml"


REPLACED, APPENDED, REWRITTEN = "replaced", "appended", "rewritten"  # how an output is written at the end


@dataclass(eq=False)  # a plugin: pluggy keeps it by identity
class Outputs:
    """This run's output files and what became of them."""

    report: Path | None = None
    summary: Path | None = None
    claimed: dict[Path, str] = field(default_factory=dict)  # each output file -> the option that names it
    wrote: list[str] = field(default_factory=list)  # 'rocm-validate report: wrote <path>'
    failed: list[str] = field(default_factory=list)  # one line per write that failed
    finished: bool = False  # the end of the run was reached and its outputs written (or tried)
    stopped: str | None = None  # the usage error that stopped the run, when one did

    def _keep_usage_error(self) -> Generator[None, Any, Any]:
        try:
            return (yield)
        except UsageError as exc:
            self.stopped = str(exc)
            raise

    # A usage error raised at the start (the device, a corrupt baseline), in collection (a marker,
    # a deselected test) or after the tests (a floor that gated nothing) is kept for the verdict.
    pytest_sessionstart = pytest.hookimpl(wrapper=True, tryfirst=True)(_keep_usage_error)
    pytest_collection = pytest.hookimpl(wrapper=True, tryfirst=True)(_keep_usage_error)
    pytest_runtestloop = pytest.hookimpl(wrapper=True, tryfirst=True)(_keep_usage_error)

    def claim(self, path: Path, label: str, example: str, how: str) -> None:
        """Claim `path` for one output (`label`: the option and its value), written at the end as
        `how` says: REPLACED (atomically, a JSON file), APPENDED (the summary) or REWRITTEN in place
        (pytest's JUnit). Proven writable now by creating and removing a file beside it; an old
        regular file removed unless appended to; UsageError naming `label` otherwise. Two outputs
        never share a file, and a device or a pipe (/dev/stdout) is never removed or replaced."""
        other = self.claimed.get(path)
        if other is not None:
            raise UsageError(f"{label}: {other} writes {path} too; give each output a file of its own")
        if path.is_dir():
            raise UsageError(f"{label} is a folder; expected a file path such as {example}")
        problem = writable_folder_problem(path.parent)
        if problem:
            raise UsageError(f"{label}: cannot write there: {problem}; choose a writable path such as {example}")
        self.claimed[path] = label
        if not path.exists() or how == APPENDED:
            return
        if not path.is_file():
            if how == REPLACED:
                raise UsageError(
                    f"{label} is not a regular file (a device or a pipe), and the file is written by replacing it "
                    f"whole; give a file path such as {example}"
                )
            return
        try:
            path.unlink()
        except OSError as exc:
            raise UsageError(
                f"{label}: the file there from an earlier run cannot be replaced ({exc.strerror or exc}); "
                f"choose a writable path such as {example}"
            ) from None


USAGE_ERROR_KEY = "rocm_validate_usage_error"  # a pytest-xdist worker's workeroutput: the usage error it found


def stop_run(config: pytest.Config, problem: str) -> None:
    """A usage error found while collecting: raised in a plain run or the controller; in a
    pytest-xdist worker, handed to the controller (workeroutput), which ends the run with it, exit
    status 4: pytest-xdist would report one raised in a worker as an internal error."""
    if not is_xdist_worker(config):
        raise UsageError(problem)
    config.workeroutput.setdefault(USAGE_ERROR_KEY, problem)  # type: ignore[attr-defined]  # set by pytest-xdist


def claim(config: pytest.Config, spec: OptionSpec, example: str, how: str = REPLACED) -> Path | None:
    """The file `spec` names (None when the option is not given), claimed (`Outputs.claim`) by
    the process that writes it."""
    value, source = raw_value(config, spec)
    if value is None:
        return None
    path = given_path(config, value, source)
    if not is_xdist_worker(config):
        outputs_of(config).claim(path, f"{source_name(source)}={value!r}", example, how)
    return path


def claim_junit(config: pytest.Config) -> None:
    """pytest's own --junitxml, claimed as ours are: the file CI's test reporter reads is this
    run's or none (pytest ignores an empty value; here it is a usage error)."""
    value = getattr(config.option, "xmlpath", None)
    if value is None or is_xdist_worker(config):
        return
    if not str(value).strip():
        raise UsageError(empty_value_problem(JUNIT_FLAG, str(value), os.environ))
    path = Path(config.invocation_params.dir, os.path.expanduser(str(value))).resolve()
    outputs_of(config).claim(path, f"{JUNIT_FLAG}={value!r}", "junit.xml", REWRITTEN)


def claim_run_outputs(config: pytest.Config) -> Outputs:
    """The report, summary and JUnit file of this run, and every plugin's own outputs
    (pytest_rocm_claim_outputs), claimed (see the module's docstring); the report and summary
    kept in the run context."""
    found = Outputs()
    run_state(config).put(found)
    claim_junit(config)
    found.report = claim(config, REPORT, "report.json")
    found.summary = claim(config, SUMMARY, "summary.md", APPENDED)
    config.hook.pytest_rocm_claim_outputs(config=config)  # a suite's own, such as --rocm-benchmark-json
    if not is_xdist_worker(config):
        config.pluginmanager.register(found, "rocm_validate_outputs")
    return found


def note_stop(config: pytest.Config, stopped: str | None) -> None:
    """After a run that ended before writing its outputs (a usage error `stopped`, or an internal
    error): say so at the end of the summary, where the page's last heading is read."""
    state = config.stash.get(STATE_KEY, None)
    found = None if state is None else state.find(Outputs)
    if found is None or found.finished or found.summary is None or is_xdist_worker(config):
        return
    with contextlib.suppress(OSError):  # the run is ending on its own error already; pytest prints that one
        append_text(found.summary, stop_section(stopped or found.stopped))


def outputs_of(config: pytest.Config) -> Outputs:
    """The run's outputs (claimed by the top-level plugin's configure)."""
    return run_state(config).part(Outputs)


def reason(exc: BaseException) -> str:
    """'No space left on device', from an OSError or the DataFileError that carries one."""
    cause = exc if isinstance(exc, OSError) else exc.__cause__
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return str(exc)


def write(config: pytest.Config, label: str, path: Path, writer: Callable[[Path], None]) -> bool:
    """Run `writer(path)`; a failure becomes one line (shown at the end of the run), never a
    traceback, and leaves the run's exit status alone. True when written."""
    found = outputs_of(config)
    try:
        writer(path)
    except (OSError, DataFileError) as exc:
        found.failed.append(
            f"rocm-validate {label}: could not write {path}: {reason(exc)}; nothing was written there "
            f"(the run's exit status is its tests')"
        )
        return False
    found.wrote.append(f"rocm-validate {label}: wrote {path}")
    return True


def append_text(path: Path, text: str) -> None:
    """Append `text` to `path` whole or not at all: a write that fails (a full disk) cuts the file
    back to what it held, so the summary never ends in half a table."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        held = os.fstat(descriptor)
        try:
            rest = memoryview(text.encode("utf-8"))
            while rest:
                rest = rest[os.write(descriptor, rest) :]
            if stat.S_ISREG(held.st_mode):  # a pipe or a terminal (/dev/stdout) cannot be synced
                os.fsync(descriptor)
        except OSError:
            if stat.S_ISREG(held.st_mode):
                os.ftruncate(descriptor, held.st_size)
            raise
    finally:
        os.close(descriptor)


def stop_section(message: str | None) -> str:
    """The summary's section for a run that stopped before its end: the usage error's message, or
    where to look."""
    if message:
        return f"## rocm-validate: nothing was validated (usage error, exit status 4)\n\n{message}\n\n"
    return (
        "## rocm-validate: nothing was validated (the run stopped before its end)\n\n"
        "A usage error (exit status 4) or an internal error (exit status 3) stopped it before it wrote this "
        "summary; the job's log says which.\n\n"
    )
