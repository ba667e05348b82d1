"""The backstop behind pytest-timeout's signal method: a test stuck where the signal cannot reach
it ends the run with its name and every thread's stack instead of hanging CI; a test that ended
never trips it."""

import faulthandler
import json
import threading
import time

import pytest

from rocm_validate.core import watchdog

STUCK = """
import signal
import time

def test_stuck():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # as a thread blocked in C: no handler runs
    time.sleep(10_000)

def test_after_it():
    pass
"""


def test_a_test_the_timeout_signal_cannot_interrupt_ends_the_run_naming_it(pytester):
    pytester.makepyfile(test_stuck=STUCK)
    result = pytester.runpytest_subprocess("--rocm-timeout=1", "-p", "no:cacheprovider", timeout=60)
    assert result.ret == 1
    assert result.duration < 30  # the watchdog fires 10 s past the 1 s timeout
    result.stderr.fnmatch_lines(
        [
            "rocm-validate: test_stuck.py::test_stuck is stuck in native code 10 s past its 1 s timeout*"
            "Ending the run with exit status 1*run with -n 1 (a pytest-xdist worker*",
            "*File *test_stuck.py*, line * in test_stuck",
        ]
    )
    assert "test_after_it" not in result.stdout.str() + result.stderr.str()


ENDED = """
import time

import pytest

from rocm_validate.core.watchdog import grace_s

def test_quick():
    pass

def test_sleeps_forever():
    time.sleep(10_000)

@pytest.mark.timeout(60)
def test_outlives_their_watchdogs():
    time.sleep(grace_s(1) + 2)
"""


def test_a_test_that_passed_or_timed_out_never_trips_the_watchdog_later(pytester):
    pytester.makepyfile(ENDED)
    result = pytester.runpytest_subprocess("--rocm-timeout=1", "-p", "no:cacheprovider", timeout=90)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_sleeps_forever ran past its 1 s timeout*"])
    assert "stuck in native code" not in result.stdout.str() + result.stderr.str()


def test_faulthandler_is_armed_past_the_watchdog_as_a_last_resort(pytester, monkeypatch):
    armed = _record_faulthandler_timers(monkeypatch)
    pytester.makepyfile("def test_ok():\n    pass\n")
    pytester.runpytest_inprocess("--rocm-timeout=1").assert_outcomes(passed=1)
    assert armed == [(1 + watchdog.grace_s(1) + watchdog.FAULTHANDLER_EXTRA_S, True)]


def test_a_run_that_sets_faulthandler_timeout_keeps_faulthandler_to_itself(pytester, monkeypatch):
    armed = _record_faulthandler_timers(monkeypatch)
    pytester.makeini("[pytest]\nfaulthandler_timeout = 100\n")
    pytester.makepyfile("def test_ok():\n    pass\n")
    pytester.runpytest_inprocess("--rocm-timeout=1").assert_outcomes(passed=1)
    assert armed == [(100.0, False)]  # pytest's own timer only


def _record_faulthandler_timers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, bool]]:
    """(timeout, exit) of every faulthandler timer armed from now on, none of them armed for real."""
    armed: list[tuple[float, bool]] = []

    def record(timeout: float, repeat: bool = False, file: object = None, exit: bool = False) -> None:
        armed.append((timeout, exit))

    monkeypatch.setattr(faulthandler, "dump_traceback_later", record)
    return armed


@pytest.mark.parametrize("timeout_s, grace", [(1, 10), (40, 10), (100, 25), (240, 60), (1200, 60)])
def test_the_grace_is_a_quarter_of_the_timeout_between_10_and_60_s(timeout_s, grace):
    assert watchdog.grace_s(timeout_s) == grace


def test_a_watchdog_runs_its_action_after_its_delay():
    fired = threading.Event()
    dog = watchdog.Watchdog(0.05, fired.set)
    dog.start()
    assert fired.wait(5)


def test_a_cancelled_watchdog_never_runs_its_action():
    fired = threading.Event()
    dog = watchdog.Watchdog(0.05, fired.set)
    dog.start()
    dog.cancel()
    time.sleep(0.2)
    assert not fired.is_set()


SUITE_STUCK = "import pytest\n\npytestmark = pytest.mark.rocm_suite('correctness')\n" + STUCK


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["plain", "xdist"])
def test_a_hung_test_leaves_its_report_with_the_hang_category(pytester, workers):
    pytester.makepyfile(test_stuck=SUITE_STUCK)
    result = pytester.runpytest_subprocess(
        "--rocm-timeout=1",
        "--rocm-device=cpu",
        "-p",
        "no:cacheprovider",
        "--rocm-report=r.json",
        "--rocm-summary=s.md",
        "--junitxml=j.xml",
        *workers,
        timeout=90,
    )
    assert result.ret == 1
    assert result.parseoutcomes()["failed"] == 1  # counted once, also where pytest-xdist saw its worker crash
    report = json.loads((pytester.path / "r.json").read_text())
    tests = {t["nodeid"].split("::")[-1]: t for t in report["tests"]}
    assert tests["test_stuck"]["category"] == "hang"
    assert "is stuck in native code 10 s past its 1 s timeout" in tests["test_stuck"]["message"]
    assert report["exit_status"] == 1
    assert report["verdict"].startswith("rocm-validate verdict: hang: test_stuck.py::test_stuck never returned")
    assert 'name="rocm_category" value="hang"' in (pytester.path / "j.xml").read_text()
    assert "hang" in (pytester.path / "s.md").read_text()
    if not workers:  # a plain run ends: the test after it was not run
        assert tests["test_after_it"]["outcome"] == "skipped"
        assert "not run: the watchdog ended the run" in tests["test_after_it"]["message"]
