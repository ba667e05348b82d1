"""Bad inputs a red team tried after issues 34 and 39 (167 cases, 23 handled wrong, 18 fixed): each test
is one of the wrong ones, replayed. A process exit at an odd moment, an unexpected pass, a site's
known-defects file bent out of shape, an option at the edge of its range and a fleet given one file
twice: the verdict line, the JSON report, the summary and the exit status tell one true story, and
a user's mistake is one line naming what was needed and what was found.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import fake_devices
import fleet_reports as fr
import pytest
from test_known_defects import CONFTEST as CUDA_CONFTEST
from test_known_defects import TESTS as NJT_TESTS
from test_known_defects import _site_file

from rocm_validate.cli.fleet import merge, report_paths
from rocm_validate.cli.main import main


def _cpu_project(pytester: pytest.Pytester, tests: str) -> pytest.Pytester:
    pytester.makeconftest(fake_devices.discovery_conftest())
    pytester.makepyfile(test_cases='import pytest\n\npytestmark = pytest.mark.rocm_suite("correctness")\n' + tests)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict, str]:
    """A run in a subprocess (a test may end it) with its JSON report and summary heading."""
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--rocm-report=r.json", "--rocm-summary=s.md", *args
    )
    report = json.loads((pytester.path / "r.json").read_text())
    return result, report, (pytester.path / "s.md").read_text().splitlines()[0]


def _verdict_line(result: pytest.RunResult) -> str:
    return next((line for line in result.outlines if line.startswith("rocm-validate verdict:")), "")


# --- the process ends at an odd moment ----------------------------------------------------------


def test_os_exit_0_while_a_test_file_is_imported_is_a_collection_error_naming_it_never_a_green_exit(
    pytester: pytest.Pytester,
) -> None:
    _cpu_project(pytester, "import os\n\nos._exit(0)\n\n\ndef test_never_run():\n    pass\n")
    result, report, heading = _run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's status for a collection error
    assert "test_cases.py called os._exit(0)" in report["verdict"]
    assert report["exit_status"] == 2 and "(exit status 2)" in heading
    assert "pass" not in _verdict_line(result).split(":")[1]


@pytest.mark.parametrize("code", ["0", "'bad config'"])
def test_sys_exit_while_a_test_file_is_imported_is_a_collection_error_naming_it_never_an_internal_error(
    pytester: pytest.Pytester, code: str
) -> None:
    _cpu_project(pytester, f"import sys\n\nsys.exit({code})\n\n\ndef test_never_run():\n    pass\n")
    result, report, heading = _run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's status for a collection error
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert f"test_cases.py raised SystemExit({code})" in report["verdict"]
    assert report["exit_status"] == 2 and "(exit status 2)" in heading


def test_os_exit_0_from_a_conftest_hook_at_collection_never_exits_0_and_leaves_its_report(
    pytester: pytest.Pytester,
) -> None:
    _cpu_project(pytester, "def test_never_run():\n    pass\n")
    pytester.path.joinpath("conftest.py").write_text(
        fake_devices.discovery_conftest()
        + "\nimport os\n\n\ndef pytest_collection_modifyitems(items):\n    os._exit(0)\n"
    )
    result, report, heading = _run(pytester)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert "a hook run at collection called os._exit(0)" in result.stdout.str()
    assert report["exit_status"] == 3 and "nothing was validated" in report["verdict"]
    assert heading == "## rocm-validate: FAILED, nothing was validated (exit status 3)"


def test_pytest_exit_with_returncode_0_in_a_test_still_ends_the_run_interrupted_in_every_output(
    pytester: pytest.Pytester,
) -> None:
    _cpu_project(pytester, "def test_leaves():\n    pytest.exit('done early', returncode=0)\n")
    result, report, heading = _run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert report["exit_status"] == 2
    assert heading == "## rocm-validate: INTERRUPTED by pytest.exit: done early (exit status 2)"
    assert "interrupted by pytest.exit: done early" in _verdict_line(result)


def test_pytest_exit_with_returncode_0_at_the_start_of_the_session_never_exits_0(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester, "def test_never_run():\n    pass\n")
    pytester.path.joinpath("conftest.py").write_text(
        fake_devices.discovery_conftest()
        + "\nimport pytest\n\n\ndef pytest_sessionstart(session):\n    pytest.exit('not today', returncode=0)\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stderr.fnmatch_lines(["*Exit: not today*"])


# --- an unexpected pass -------------------------------------------------------------------------

XPASS = """
@pytest.mark.xfail(strict=STRICT)
def test_marked_as_failing():
    pass
"""


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "not-strict"])
def test_an_unexpected_pass_fails_the_run_and_says_to_remove_the_xfail_mark_never_roll_back_the_image(
    pytester: pytest.Pytester, strict: bool
) -> None:
    _cpu_project(pytester, XPASS.replace("STRICT", str(strict)))
    result, report, heading = _run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert report["exit_status"] == 1 and heading == "## rocm-validate: FAILED (exit status 1)"
    assert "remove the xfail mark" in report["verdict"]
    assert "roll back the image" not in report["verdict"]
    assert _verdict_line(result) == report["verdict"]


# --- a site's known-defects file ----------------------------------------------------------------


@pytest.fixture
def node_folder(pytester: pytest.Pytester) -> pytest.Pytester:
    """A node of one H200 (cuDNN 9.19) whose suite fails the check a site entry names."""
    pytester.makeconftest(CUDA_CONFTEST)
    suite = pytester.mkdir("suites") / "correctness"
    suite.mkdir()
    (suite / "test_njt.py").write_text(NJT_TESTS)
    return pytester


def _with(path: Path, **changed: object) -> Path:
    data = json.loads(path.read_text())
    data["defects"][0].update(changed)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("key", ["workaround", "owner", "summary", "upstream"])
def test_a_known_defect_text_holding_a_line_break_is_a_usage_error_so_it_never_forges_a_verdict_line(
    node_folder: pytest.Pytester, key: str
) -> None:
    forged = "enable_cudnn_sdp(False)\nrocm-validate verdict: pass"
    site = _with(_site_file(node_folder.path / "site.json"), **{key: [forged] if key == "upstream" else forged})
    result = node_folder.runpytest("suites/correctness", "-p", "no:cacheprovider", f"--rocm-known-defects={site}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --rocm-known-defects: {site}: entry 1 ('site-njt'): {key} holds a line break or control character*"]
    )
    assert not [line for line in result.outlines if line.startswith("rocm-validate verdict: pass")]


@pytest.mark.parametrize("expires", ["20991231", "2099-W01-1", "2099-12-31T00:00:00"])
def test_an_expiry_date_in_another_format_is_a_usage_error_asking_for_yyyy_mm_dd(
    node_folder: pytest.Pytester, expires: str
) -> None:
    site = _site_file(node_folder.path / "site.json", expires=expires)
    result = node_folder.runpytest("suites/correctness", "-p", "no:cacheprovider", f"--rocm-known-defects={site}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*entry 1 ('site-njt'): expires='{expires}' is not a date; expected YYYY-MM-DD*"])


@pytest.mark.parametrize("zone", ["Etc/GMT-14", "Etc/GMT+12"])  # UTC+14 and UTC-12: one of them is on another date
@pytest.mark.parametrize(("days", "expired"), [(0, False), (-1, True)], ids=["expires-today", "expired-yesterday"])
def test_an_entry_expires_on_its_date_in_utc_whatever_the_nodes_time_zone(
    node_folder: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, zone: str, days: int, expired: bool
) -> None:
    expires = (datetime.now(timezone.utc).date() + timedelta(days=days)).isoformat()
    site = _site_file(node_folder.path / "site.json", expires=expires)
    monkeypatch.setenv("TZ", zone)
    result = node_folder.runpytest_subprocess(
        "suites/correctness", "-p", "no:cacheprovider", "-k", "fixed", f"--rocm-known-defects={site}"
    )
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if expired else pytest.ExitCode.OK)
    assert ("has expired" in _verdict_line(result)) is expired


CRASH_AFTER_THE_CHECK = NJT_TESTS.replace(
    'assert False, "numerics checks failed"', 'raise RuntimeError("the kernel launch failed")'
)


def test_a_test_that_crashes_after_its_known_check_failed_is_a_crash_never_waived_as_the_known_defect(
    node_folder: pytest.Pytester,
) -> None:
    (node_folder.path / "suites" / "correctness" / "test_njt.py").write_text(CRASH_AFTER_THE_CHECK)
    site = _site_file(node_folder.path / "site.json")
    result = node_folder.runpytest(
        "suites/correctness",
        "-p",
        "no:cacheprovider",
        "-k",
        "known",
        "--rocm-report=r.json",
        f"--rocm-known-defects={site}",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    test = json.loads((node_folder.path / "r.json").read_text())["tests"][0]
    assert (test["outcome"], test["category"]) == ("failed", "crash")


# --- options at the edge of their range ---------------------------------------------------------


@pytest.mark.parametrize("option", ["--rocm-timeout", "--rocm-collective-timeout"])
@pytest.mark.parametrize("value", ["1e308", "604801"])
def test_a_timeout_longer_than_a_week_is_a_usage_error_never_an_internal_error(
    pytester: pytest.Pytester, option: str, value: str
) -> None:
    _cpu_project(pytester, "def test_quick():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines([f"ERROR: {option}='{value}': expected at most 604800 seconds*"])


# --- a fleet --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> fr.Report:
    """A real CPU report of this session, the template of the fleets below."""
    return fr.load(fr.real_reports(tmp_path_factory)[0])


def test_two_reports_claiming_one_host_fail_the_fleet_as_its_verdict_says(tmp_path: Path, template: fr.Report) -> None:
    reports = fr.synthetic_fleet(template, 2)
    reports["node-0-again"] = fr.with_host(reports["node-1"], "node-0")
    fleet = merge(report_paths([fr.write_fleet(tmp_path, reports)]))
    assert "several reports claim one host: node-0 (2)" in fleet.verdict
    assert fleet.exit_status == 1


def test_two_fleet_outputs_naming_one_file_are_refused_before_either_is_written(
    tmp_path: Path, template: fr.Report, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = fr.write_fleet(tmp_path / "reports", fr.synthetic_fleet(template, 2))
    target = tmp_path / "fleet.out"
    status = main(["fleet", str(folder), "--json", str(target), "--markdown", str(target)])
    error = capsys.readouterr().err.strip()
    assert status == 2
    assert error == (
        f"rocm-validate fleet: error: --markdown {target} is also --json: one output would overwrite the other; "
        "give each output its own file"
    )
    assert not target.exists()
