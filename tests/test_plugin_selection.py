"""Suite selection: by folder or marker; unselected suites are deselected, not skipped."""

import pytest


@pytest.fixture
def three_suites(pytester):
    for suite in ("correctness", "perf", "convergence"):
        folder = pytester.path / "suites" / suite
        folder.mkdir(parents=True)
        (folder / f"test_{suite}.py").write_text(f"def test_{suite}():\n    pass\n")
    pytester.makepyfile(
        test_own="import pytest\n\n"
        "def test_unassigned():\n    pass\n\n"
        "@pytest.mark.rocm_suite('perf')\n"
        "def test_marked_perf():\n    pass\n"
    )
    return pytester


def test_the_default_runs_correctness_and_deselects_the_other_suites(three_suites):
    result = three_suites.runpytest("-v")
    result.assert_outcomes(passed=2, deselected=3)
    result.stdout.fnmatch_lines(["*test_correctness PASSED*", "*test_unassigned PASSED*"])


def test_a_suite_list_selects_by_folder_and_by_marker(three_suites):
    result = three_suites.runpytest("-v", "--rocm-suite=perf")
    result.assert_outcomes(passed=3, deselected=2)
    result.stdout.fnmatch_lines(["*test_perf PASSED*", "*test_marked_perf PASSED*"])


def test_all_selects_every_suite(three_suites):
    three_suites.runpytest("--rocm-suite=all").assert_outcomes(passed=5)


def test_a_marker_naming_no_suite_is_a_usage_error(pytester):
    pytester.makepyfile("import pytest\n\n@pytest.mark.rocm_suite('fast')\ndef test_x():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: *test_x: rocm_suite marker needs one of preflight, correctness, perf, convergence, collectives; found 'fast'"
        ]
    )


def test_the_suite_of_each_test_is_a_junit_property(three_suites):
    three_suites.runpytest("--rocm-suite=perf", "--junitxml=out.xml").assert_outcomes(passed=3)
    xml = (three_suites.path / "out.xml").read_text()
    assert xml.count('<property name="rocm_suite" value="perf" />') == 2


def test_the_projects_own_suites_collect_together_without_name_clashes():
    """suites/correctness/test_gemm.py and suites/perf/test_gemm.py must both import."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--rocm-suite=all",
            "--rocm-device=cpu",
            "--co",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert "suites/perf/test_gemm.py" in done.stdout and "suites/correctness/test_gemm.py" in done.stdout


def test_an_argument_whose_every_test_the_selection_removed_is_named_with_the_reason(tmp_path):
    from types import SimpleNamespace

    from rocm_validate.core.suites import named_but_deselected

    (tmp_path / "test_a.py").write_text("")
    long, short = (SimpleNamespace(nodeid=f"test_a.py::{n}", path=tmp_path / "test_a.py") for n in ("long", "short"))
    why = {"test_a.py::long": "it is a test of the extended level"}
    assert named_but_deselected(["test_a.py::long"], tmp_path, [short], [long], why) == (
        "test_a.py::long: it is a test of the extended level"
    )
    assert named_but_deselected(["test_a.py"], tmp_path, [short], [long], why) is None  # part of it runs
    assert named_but_deselected(["test_a.py::short"], tmp_path, [short], [long], why) is None
