"""Levels (quick / standard / extended) with their budgets, and per-test timeouts: a hung test
fails within its timeout and the run goes on."""

import pytest

from rocm_validate.core import levels
from rocm_validate.core.plan import RunBudget
from rocm_validate.node.budget import describe_budget

LEVELLED = """
import pytest

@pytest.mark.rocm_level("quick")
def test_smoke():
    pass

def test_standard():
    pass

@pytest.mark.rocm_level("extended")
def test_sustained():
    pass
"""


@pytest.mark.parametrize(
    "level, runs",
    [
        ("quick", {"test_smoke"}),
        ("standard", {"test_smoke", "test_standard"}),
        ("extended", {"test_smoke", "test_standard", "test_sustained"}),
    ],
)
def test_a_level_runs_its_own_tests_and_those_below(pytester, level, runs):
    pytester.makepyfile(LEVELLED)
    result = pytester.runpytest(f"--rocm-level={level}", "-v")
    result.assert_outcomes(passed=len(runs))
    passed = {line.split("::")[1].split()[0] for line in result.stdout.lines if " PASSED" in line}
    assert passed == runs


def test_the_level_comes_from_the_environment_too(pytester, monkeypatch):
    pytester.makepyfile(LEVELLED)
    monkeypatch.setenv("ROCM_VALIDATE_LEVEL", "quick")
    pytester.runpytest().assert_outcomes(passed=1)


def test_an_unknown_level_is_a_usage_error_listing_the_levels(pytester):
    pytester.makepyfile(LEVELLED)
    result = pytester.runpytest("--rocm-level=bogus")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-level='bogus': unknown level; accepted: quick, standard, extended"])


def test_a_marker_naming_no_level_is_a_usage_error_naming_the_test(pytester):
    pytester.makepyfile("import pytest\n\n@pytest.mark.rocm_level('fast')\ndef test_x():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: *test_x: rocm_level marker needs one of quick, standard, extended, found 'fast'"]
    )


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(pytester, value):
    pytester.makepyfile(LEVELLED)
    result = pytester.runpytest(f"--rocm-timeout={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-timeout=*: expected a positive number of seconds*"])


HANGS = """
import time

def test_sleeps_forever():
    time.sleep(10_000)

def test_after_it():
    pass
"""


def test_a_test_that_sleeps_forever_fails_within_its_timeout_and_the_run_goes_on(pytester):
    pytester.makepyfile(HANGS)
    result = pytester.runpytest_subprocess("--rocm-timeout=1", "-p", "no:cacheprovider", timeout=60)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*Timeout (>1.0s) from pytest-timeout*",
            "*test_sleeps_forever ran past its 1 s timeout*the stack dump shows what it was doing*--rocm-timeout=SECONDS",
        ]
    )


def test_under_xdist_a_hung_test_fails_alone_and_its_worker_goes_on(pytester):
    """Workers time out with the signal method (the watchdog ends one only when native code holds it)."""
    pytester.makepyfile(HANGS)
    result = pytester.runpytest_subprocess("--rocm-timeout=1", "-n", "2", "-p", "no:cacheprovider", timeout=90)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*test_sleeps_forever ran past its 1 s timeout*"])
    result.stdout.no_fnmatch_line("*crashed while running*")


def test_the_users_own_timeout_option_wins_over_the_defaults(pytester):
    pytester.makepyfile("import time\n\ndef test_slowish():\n    time.sleep(1.5)\n")
    pytester.runpytest_subprocess("--rocm-timeout=1", "--timeout=5", timeout=60).assert_outcomes(passed=1)


def test_every_test_gets_the_default_timeout_of_its_suite_and_level():
    assert levels.timeout_for("perf", "standard", None) == levels.TIMEOUTS_S["perf"]["standard"]
    assert levels.timeout_for(None, "quick", None) == levels.DEFAULT_TIMEOUT_S["quick"]
    assert levels.timeout_for("perf", "extended", 30.0) == 30.0


def test_the_header_states_the_budget_and_the_summary_the_time_used(pytester):
    pytester.makeini("[pytest]\n")
    pytester.mkdir("suites")
    pytester.mkdir("suites/correctness")
    (pytester.path / "suites" / "correctness" / "test_a.py").write_text("def test_ok():\n    pass\n")
    result = pytester.runpytest("--rocm-suite=correctness", "--rocm-device=cpu", "--rocm-level=quick")
    result.assert_outcomes(passed=0, deselected=1)
    result.stdout.fnmatch_lines(["rocm-validate level quick: budget 1 min 30 s on a 2-core CPU; per-test timeout *"])
    standard = pytester.runpytest("--rocm-suite=correctness", "--rocm-device=cpu")
    standard.assert_outcomes(passed=1)
    standard.stdout.fnmatch_lines(["rocm-validate level standard: * s of its 7 min budget"])


def test_budgets_read_in_minutes_and_seconds():
    assert describe_budget("quick", True, None).startswith("quick: budget 1 min on one GPU")
    assert RunBudget("quick", 60, 0, "").used(75) == "quick: 1 min 15 s of its 1 min budget OVER the budget"
    assert RunBudget("standard", 420, 0, "").used(42) == "standard: 42 s of its 7 min budget"
    assert RunBudget("standard", 300, 2, "").used(278) == "standard: 4 min 38 s of its 5 min budget for 2 GPUs"
