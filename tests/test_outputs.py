"""The files a run writes (core.outputs): claimed at the start, written whole at the end, a failed
write one line; and empty option values refused (core.options). Write failures are injected by
patching the one OS call that fails on a full disk."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any

import pytest

from rocm_validate.core import outputs
from rocm_validate.core.options import empty_value_problem
from rocm_validate.core.session import STATE_KEY, RunState
from rocm_validate.errors import UsageError

PASSING = """
import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


def test_ok():
    pass
"""


def _full_disk(*args: object, **kwargs: object) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_an_append_that_fails_leaves_the_file_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("## the build step\n")
    real_write = os.write
    calls = []

    def half_then_full(descriptor: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(descriptor, bytes(data[:10]))  # a short write, then the disk is full
        return _full_disk()

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError, match="No space left on device"):
        outputs.append_text(summary, "## rocm-validate: passed (exit status 0)\n" * 50)
    assert summary.read_text() == "## the build step\n" and len(calls) == 2


def test_an_append_writes_the_whole_text_after_what_the_file_held(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("## the build step\n")
    outputs.append_text(summary, "## rocm-validate: passed\n")
    assert summary.read_text() == "## the build step\n## rocm-validate: passed\n"


def test_a_write_that_fails_is_one_line_naming_the_file_and_the_cause(tmp_path: Path) -> None:
    class Config:
        stash = pytest.Stash()

    config: Any = Config()
    state = RunState(config=config, resolve=lambda state: None)  # type: ignore[arg-type,return-value]
    state.put(outputs.Outputs())
    config.stash[STATE_KEY] = state

    def writer(path: Path) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    assert not outputs.write(config, "report", tmp_path / "report.json", writer)
    assert outputs.outputs_of(config).failed == [
        f"rocm-validate report: could not write {tmp_path / 'report.json'}: Read-only file system; nothing was "
        "written there (the run's exit status is its tests')"
    ]


def test_a_claimed_path_loses_its_old_file_but_an_appended_one_keeps_it(tmp_path: Path) -> None:
    old, kept = tmp_path / "report.json", tmp_path / "summary.md"
    old.write_text("last week: passed")
    kept.write_text("## the build step\n")
    claimed = outputs.Outputs()
    claimed.claim(old, "--rocm-report='report.json'", "report.json", outputs.REPLACED)
    claimed.claim(kept, "--rocm-summary='summary.md'", "summary.md", outputs.APPENDED)
    assert not old.exists() and kept.read_text() == "## the build step\n"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.md"]  # the probe file is gone too


@pytest.mark.parametrize(
    ("where", "complaint"),
    [
        ("folder", "is a folder; expected a file path such as report.json"),
        ("/proc/x.json", "cannot write there"),
        ("pipe", "is not a regular file (a device or a pipe)"),
    ],
)
def test_a_path_no_report_can_be_written_to_is_refused_at_the_start(tmp_path: Path, where: str, complaint: str) -> None:
    path = {"folder": tmp_path, "pipe": tmp_path / "report.json"}.get(where, Path(where))
    if where == "pipe":
        os.mkfifo(path)
    with pytest.raises(UsageError, match=re.escape(complaint)):
        outputs.Outputs().claim(path, f"--rocm-report={str(path)!r}", "report.json", outputs.REPLACED)
    assert where != "pipe" or path.is_fifo()


def test_a_pipe_named_for_an_output_written_in_place_is_kept(tmp_path: Path) -> None:
    junit, summary = tmp_path / "junit", tmp_path / "summary"
    os.mkfifo(junit)
    os.mkfifo(summary)
    claimed = outputs.Outputs()
    claimed.claim(junit, "--junitxml='junit'", "junit.xml", outputs.REWRITTEN)
    claimed.claim(summary, "--rocm-summary='summary'", "summary.md", outputs.APPENDED)
    assert junit.is_fifo() and summary.is_fifo()


def test_two_outputs_naming_one_file_are_refused(tmp_path: Path) -> None:
    claimed = outputs.Outputs()
    claimed.claim(tmp_path / "out", "--rocm-report='out'", "report.json", outputs.REPLACED)
    with pytest.raises(UsageError, match=r"--rocm-summary='out': --rocm-report='out' writes .* too"):
        claimed.claim(tmp_path / "out", "--rocm-summary='out'", "summary.md", outputs.APPENDED)


def test_an_empty_value_names_the_variable_it_probably_came_from() -> None:
    unset = empty_value_problem("--rocm-summary", "", {})
    assert unset.startswith("--rocm-summary='': an empty value (as --rocm-summary=$GITHUB_STEP_SUMMARY gives")
    assert "GITHUB_STEP_SUMMARY is unset here" in unset
    assert "a shell variable that expanded to nothing?" in empty_value_problem("--rocm-report", "", {})


def test_an_old_junit_file_is_removed_at_the_start_of_a_run_that_stops(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PASSING)
    junit = pytester.path / "junit.xml"
    junit.write_text("<testsuite failures='0'/>")
    result = pytester.runpytest(f"--junitxml={junit}", "--rocm-device=gpu0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and not junit.exists()


def test_an_empty_junit_path_is_a_usage_error_not_silently_no_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PASSING)
    result = pytester.runpytest("--junitxml=")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --junitxml='': an empty value*"])


def test_a_usage_error_a_worker_finds_while_collecting_ends_the_run_with_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_levels="""
import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


@pytest.mark.rocm_level("extended")
def test_long():
    pass
"""
    )
    summary = pytester.path / "summary.md"
    result = pytester.runpytest_subprocess(
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        "--rocm-device=cpu",
        f"--rocm-summary={summary}",
        "test_levels.py::test_long",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["rocm-validate verdict: nothing was validated: *rocm-level=extended"])
    assert summary.read_text().startswith("## rocm-validate: usage error, nothing was validated (exit status 4)")
