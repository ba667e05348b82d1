"""Ctrl-C, SIGTERM and pytest.exit (core.interruption): the test they catch is never a pass, the
run ends interrupted (exit status 2) with every output counting as pytest does, and the handlers
are ours only for the run and never over a handler of the user's. The interrupted runs themselves
are replayed in test_bad_inputs.py."""

from __future__ import annotations

import json
import signal

import pytest

PASSING = """
import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


def test_ok():
    pass
"""

OWN_HANDLER = """
import signal

import pytest

pytestmark = pytest.mark.rocm_suite("correctness")
seen = []


def test_the_users_handler_is_in_force_and_gets_the_signal():
    assert signal.getsignal(signal.SIGTERM) is handler
    signal.raise_signal(signal.SIGTERM)
    assert seen == [signal.SIGTERM]


def handler(signum, frame):
    seen.append(signum)


signal.signal(signal.SIGTERM, handler)
"""

WORKER_SIGNALLED = """
import os, signal, time

import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


def test_first():
    pass


def test_worker_signalled():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
"""


def test_the_handlers_are_restored_after_a_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PASSING)
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    pytester.runpytest("-p", "no:cacheprovider", "--rocm-device=cpu").assert_outcomes(passed=1)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_handler_the_user_installed_is_left_in_force(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(OWN_HANDLER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--rocm-device=cpu")
    result.assert_outcomes(passed=1)


def test_a_signal_to_a_worker_counts_its_test_as_pytest_does_and_names_the_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(WORKER_SIGNALLED)
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess(
        "-n", "2", "-p", "no:cacheprovider", "--rocm-device=cpu", f"--rocm-report={report}"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    counted = {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "failed", "skipped", "errors")}
    data = json.loads(report.read_text())
    assert data["summary"] == counted and counted.get("passed", 0) <= 1
    assert data["verdict"].startswith("rocm-validate verdict: interrupted by a signal to pytest-xdist worker gw")
