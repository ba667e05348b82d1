"""The convergence suite through pytest: options, MLPerf results as tests, RCP skips, and the
whole mini-BERT path on the CPU (record RCPs, then check the reference against them)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from mllog_runs import spread, write_llama31_8b_run, write_run, write_set
from mlperf_logging.rcp_checker import rcp_checker  # noqa: F401
from transformers.models.bert import modeling_bert  # noqa: F401

import rocm_validate.convergence.check
import rocm_validate.convergence.rcps

# second import of torch crashes, and a second rocm_validate.results.jsonfile has another JsonFileError class
from rocm_validate.convergence.plugin import ProgressLine

SUITE = Path(__file__).resolve().parents[1] / "suites" / "convergence"
RECORD = "test_reference_records_convergence_points"
CHECK_REFERENCE = "suites/convergence/test_mini_bert.py::test_candidate_converges_like_the_reference[reference]"


@pytest.fixture
def suite(pytester):
    """The real convergence suite files, in a fresh rootdir."""
    target = pytester.path / "suites" / "convergence"
    target.mkdir(parents=True)
    for source in SUITE.glob("test_*.py"):
        (target / source.name).write_text(source.read_text())
    return pytester


def run_suite(pytester, *args):
    return pytester.runpytest("--rocm-suite=convergence", "--rocm-device=cpu", "-p", "no:cacheprovider", "-rs", *args)


def test_mlperf_results_become_one_test_per_file_and_one_for_the_set(suite):
    runs = write_set(suite.path / "runs", spread(2_450_000), batch=448)
    write_run(runs / "result_3.txt", 2_450_000, batch=448, status="aborted")
    result = run_suite(suite, f"--rocm-mlperf-results={runs}", "-k", "converged or rcp_check")
    result.assert_outcomes(passed=10, failed=1)
    result.stdout.fnmatch_lines(["*result_3.txt: run_stop status is 'aborted': the run did not converge*"])
    result.stdout.fnmatch_lines(["*mlperf.olympic_mean_minutes*"])


def test_mlperf_results_that_fail_the_rcp_check_fail_the_set_test_with_the_checkers_message(suite):
    runs = write_set(suite.path / "runs", spread(2_100_000), batch=448)
    result = run_suite(suite, f"--rocm-mlperf-results={runs}", "-k", "rcp_check")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*bert run set * fails MLPerf's RCP check: RCP found*"])


def test_without_results_the_mlperf_tests_skip_saying_what_they_need(suite):
    result = run_suite(suite, "-k", "mlperf")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(
        ["SKIPPED*needs --rocm-mlperf-results=DIR (a folder of MLPerf result_*.txt files), found none"]
    )


def test_the_table_and_the_summary_show_the_score_and_the_normalization_factor(suite):
    runs = write_set(suite.path / "runs", [172_000] * 5 + [184_288] * 5, writer=write_llama31_8b_run)
    summary = suite.path / "summary.md"
    result = run_suite(
        suite, f"--rocm-mlperf-results={runs}", "--rocm-ruleset=5.1.0", f"--rocm-summary={summary}", "-k", "mlperf"
    )
    result.assert_outcomes(passed=21)
    result.stdout.fnmatch_lines(["*mlperf.normalization_factor*1.004*", "*mlperf.score_minutes*14.5*"])
    assert "mlperf.score_minutes" in summary.read_text() and "mlperf.normalization_factor" in summary.read_text()


def test_results_whose_rcps_are_in_another_ruleset_stop_the_run_naming_that_ruleset(suite):
    runs = write_set(suite.path / "runs", [172_000] * 3, writer=write_llama31_8b_run)
    result = run_suite(suite, f"--rocm-mlperf-results={runs}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rocm-mlperf-results=*: the runs are MLPerf llama31_8b, * e.g. --rocm-ruleset=5.1.0"]
    )


def test_garbage_results_are_a_configuration_failure_and_the_verdict_says_what_to_fix(suite):
    runs = suite.path / "runs"
    runs.mkdir()
    for index in range(3):
        (runs / f"result_{index}.txt").write_text("not an MLPerf log\n")
    result = run_suite(suite, f"--rocm-mlperf-results={runs}", "-k", "mlperf")
    result.assert_outcomes(failed=7)
    result.stdout.fnmatch_lines(
        [
            "rocm-validate convergence: 0 passed, 7 failed (configuration: 7)*",
            "rocm-validate verdict: inputs: fix the files or options the failed convergence tests name*",
        ]
    )
    assert "roll back" not in result.stdout.str() and "preflight" not in result.stdout.str()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (
            "--rocm-mlperf-results={path}/nowhere",
            "*--rocm-mlperf-results=*nowhere': no such folder (*nowhere); expected a folder of MLPerf result_*.txt files",
        ),
        (
            "--rocm-ruleset=4.2",
            "*--rocm-ruleset='4.2': unknown MLPerf training ruleset '4.2'; mlperf-logging has 1.0.0, *",
        ),
        ("--rocm-convergence-seeds=2", "*--rocm-convergence-seeds='2': expected a whole number of seeds, at least 3*"),
        ("--rocm-mlperf-rcp={path}/missing.json", "*--rocm-mlperf-rcp=*missing.json: file not found*"),
    ],
    ids=["missing-results-folder", "unknown-ruleset", "too-few-seeds", "missing-rcp-file"],
)
def test_a_bad_option_value_is_a_usage_error_naming_option_value_and_accepted_forms(suite, option, message):
    result = run_suite(suite, option.format(path=suite.path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_the_ruleset_can_come_from_the_ini_file(suite):
    suite.makeini("[pytest]\nrocm_ruleset = 9.9.9\n")
    result = run_suite(suite, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*rocm_ruleset (ini)='9.9.9': unknown MLPerf training ruleset*"])


@pytest.fixture
def no_shipped_rcps(monkeypatch, tmp_path):
    """A build of the package without its shipped RCPs (in-process runs see the patched module)."""
    monkeypatch.setattr(rocm_validate.convergence.rcps, "SHIPPED", tmp_path / "none")


def test_the_shipped_rcps_check_every_candidate_on_a_device_with_no_rcps_of_its_own(suite):
    (suite.path / "baselines").mkdir()
    result = run_suite(suite, f"--rocm-baselines={suite.path / 'baselines'}", CHECK_REFERENCE)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*reference: pass: olympic mean * samples, RCP mean * (RCP found)*"])


def test_missing_rcps_skip_with_the_command_that_records_them(suite, no_shipped_rcps):
    (suite.path / "baselines").mkdir()
    result = run_suite(suite, f"--rocm-baselines={suite.path / 'baselines'}", CHECK_REFERENCE)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*no mini-BERT RCPs for this device at *baselines/rcps/cpu-*.json; record them with: "
            f"pytest --rocm-suite=convergence --rocm-device=cpu --rocm-baselines=* suites/convergence -k {RECORD} "
            "--update-baselines"
        ]
    )


def test_missing_rcps_fail_under_strict(suite, no_shipped_rcps):
    result = run_suite(suite, "--rocm-strict", CHECK_REFERENCE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*no mini-BERT RCPs for this device at * (--rocm-strict: a check that was not validated fails)"]
    )


def cpu_rcp_file(baselines):
    from rocm_validate.platform.devices import discover_cpu

    return baselines / "rcps" / f"{discover_cpu(None, {}).device_key}.json"


def test_a_corrupt_rcp_file_is_a_usage_error_naming_the_file_once(suite):
    baselines = suite.path / "baselines"
    path = cpu_rcp_file(baselines)
    path.parent.mkdir(parents=True)
    path.write_text('{"bert_ref_32": ')
    result = run_suite(suite, f"--rocm-baselines={baselines}", CHECK_REFERENCE)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: {path} is not valid JSON*; it may be truncated or hand-edited. Record them again with: pytest *"]
    )
    output = result.stdout.str() + result.stderr.str()
    assert output.count("is not valid JSON") == 1 and "Traceback" not in output and "During handling" not in output


def test_recording_rcps_then_checking_the_reference_runs_the_whole_path(suite):
    baselines = suite.path / "baselines"
    common = (f"--rocm-baselines={baselines}", "--rocm-convergence-seeds=3")
    recorded = run_suite(suite, *common, "--update-baselines", "-k", RECORD)
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(
        ["reference seed 1/6: converged at step *, * samples (eval accuracy *", "reference seed 6/6: *"]
    )
    recorded.stdout.fnmatch_lines(["mini_bert.reference.samples_to_converge * samples * updated"])
    rcps = json.loads(cpu_rcp_file(baselines).read_text())
    assert len(next(iter(rcps.values()))["Epochs to converge"]) == 6

    checked = run_suite(suite, *common, CHECK_REFERENCE)
    checked.assert_outcomes(passed=1)
    checked.stdout.fnmatch_lines(["reference seed 3/3: *", "mini_bert.reference.samples_to_converge * samples * pass"])


class FakeReporter:
    def __init__(self, isatty):
        self.isatty = isatty
        self.calls = []

    def ensure_newline(self):
        self.calls.append(("newline",))

    def rewrite(self, line, erase=False):
        self.calls.append(("rewrite", line))

    def write(self, text):
        self.calls.append(("write", text))

    def write_line(self, line):
        self.calls.append(("line", line))


class FakeCapture:
    def __init__(self):
        self.suspended = 0

    def global_and_fixture_disabled(self):
        self.suspended += 1
        return contextlib.nullcontext()


class FakeConfig:
    def __init__(self, reporter, worker=False):
        self.capture = FakeCapture()
        self.pluginmanager = self
        self._plugins = {"terminalreporter": reporter, "capturemanager": self.capture}
        if worker:
            self.workerinput = {}

    def get_plugin(self, name):
        return self._plugins[name]


def show(progress):
    progress("reference seed 1/3: step 5/160, 160 samples, eval accuracy 0.0800", False)
    progress("reference seed 1/3: converged at step 30, 960 samples (eval accuracy 0.3203, 1.3 s)", True)


def test_progress_in_a_log_keeps_only_the_line_ending_each_run_past_the_capture():
    reporter = FakeReporter(isatty=False)
    config = FakeConfig(reporter)
    show(ProgressLine(config))
    assert reporter.calls == [
        ("newline",),
        ("line", "reference seed 1/3: converged at step 30, 960 samples (eval accuracy 0.3203, 1.3 s)"),
    ]
    assert config.capture.suspended == 1


def test_progress_on_a_terminal_rewrites_one_line_per_evaluation():
    reporter = FakeReporter(isatty=True)
    show(ProgressLine(FakeConfig(reporter)))
    assert [call[0] for call in reporter.calls] == ["newline", "rewrite", "rewrite", "write"]
    assert reporter.calls[1][1].endswith("eval accuracy 0.0800")


def test_progress_is_silent_in_xdist_workers():
    reporter = FakeReporter(isatty=True)
    show(ProgressLine(FakeConfig(reporter, worker=True)))
    assert reporter.calls == []
