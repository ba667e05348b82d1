"""Skips are accounted for: counted per suite with their reasons, strict about what was not
validated, and never a hiding place for a library that is installed but broken."""

import pytest

SUITE_TESTS = """
import pytest

from rocm_validate.core.requirements import not_validated


def test_checked():
    pass


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx950"])
def test_needs_another_arch(arch):
    pytest.skip(f"needs {arch}, found sm_90")


def test_refused_by_a_backend():
    not_validated("needs flash SDPA to accept the case, found it refuses: no kernel")


def test_no_gpu():
    pytest.skip("needs a GPU, found cpu (Test CPU)")
"""


@pytest.fixture
def suite_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\n")
    pytester.mkdir("suites")
    pytester.mkdir("suites/correctness")
    (pytester.path / "suites" / "correctness" / "test_things.py").write_text(SUITE_TESTS)
    return pytester


def test_the_run_ends_with_a_line_per_suite_counting_skips_as_not_validated(suite_project):
    result = suite_project.runpytest("--rocm-suite=correctness", "--rocm-device=cpu")
    result.assert_outcomes(passed=1, skipped=5)
    result.stdout.fnmatch_lines(
        [
            "*= rocm-validate summary =*",
            "rocm-validate correctness: 1 passed, 0 failed, 5 skipped (not validated)",
            "  1 skipped: needs a GPU, found cpu (Test CPU)",
        ]
    )
    assert "needs flash SDPA to accept the case, found it refuses: no kernel" in result.stdout.str()


def test_a_not_validated_reason_reads_without_its_exception_name_in_summary_and_report(suite_project):
    result = suite_project.runpytest("--rocm-suite=correctness", "--rocm-device=cpu", "--rocm-report=report.json")
    result.stdout.fnmatch_lines(["  1 skipped: needs flash SDPA to accept the case, found it refuses: no kernel"])
    assert "NotValidated:" not in result.stdout.str()
    import json

    report = json.loads((suite_project.path / "report.json").read_text())
    refused = next(t for t in report["tests"] if t["nodeid"].endswith("test_refused_by_a_backend"))
    assert refused["message"] == "needs flash SDPA to accept the case, found it refuses: no kernel"


def test_the_commonest_skip_reasons_come_first_with_their_counts(suite_project):
    (suite_project.path / "suites" / "correctness" / "test_more.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('i', range(3))\ndef test_x(i):\n    pytest.skip('needs gfx942, found sm_90')\n"
    )
    result = suite_project.runpytest("--rocm-suite=correctness", "--rocm-device=cpu")
    result.assert_outcomes(passed=1, skipped=8)
    lines = result.stdout.str().splitlines()
    start = lines.index("rocm-validate correctness: 1 passed, 0 failed, 8 skipped (not validated)")
    assert lines[start + 1] == "  4 skipped: needs gfx942, found sm_90"


def test_strict_fails_what_was_not_validated_and_keeps_platform_limits_as_skips(suite_project):
    result = suite_project.runpytest("--rocm-suite=correctness", "--rocm-device=cpu", "--rocm-strict")
    result.assert_outcomes(passed=1, skipped=4, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*needs flash SDPA to accept the case, found it refuses: no kernel "
            "(--rocm-strict: a check that was not validated fails)*"
        ]
    )


OPTIONAL = """
from rocm_validate.core.requirements import import_optional


def test_absent():
    import_optional("a_library_nobody_installed", "check something", "pip install it")


def test_broken():
    import_optional("broken_library", "check something")


def test_broken_dependency():
    import_optional("needs_a_dependency", "check something")
"""


def test_a_library_that_is_not_installed_skips_but_one_that_is_broken_fails(pytester):
    pytester.makepyfile(broken_library="raise OSError('libamdhip64.so: cannot open shared object file')\n")
    pytester.makepyfile(needs_a_dependency="import a_missing_dependency\n")
    pytester.makepyfile(test_optional=OPTIONAL)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*needs a_library_nobody_installed to check something, found it not installed*; install it with: pip install it",
        ]
    )
    text = result.stdout.str()
    assert "broken_library is installed but cannot be imported: OSError: libamdhip64.so" in text
    assert (
        "needs_a_dependency is installed but cannot be imported: ModuleNotFoundError: No module named 'a_missing_dependency'"
        in text
    )
