"""Bad inputs a new user and a CI engineer give, replayed (issue 25): each ends in a usage error
that names the option and why, or in a run whose every output (terminal verdict, JSON report,
markdown summary, JUnit) tells the same, true story. Each test is one case of that list; the count
of failures here is the count of bad inputs not handled.

Write failures the machine cannot be made to produce (a full disk, a file that cannot be
replaced, a folder turning read-only) are injected by patching the one OS call that would fail.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import fake_devices
import pytest
from mllog_runs import write_llama31_8b_run, write_set
from test_convergence_plugin import SUITE as CONVERGENCE_SUITE  # and, imported once, what the suite imports
from test_perf_plugin import CONFTEST as PERF_CONFTEST
from test_perf_plugin import KEY as PERF_KEY
from test_perf_plugin import TWO_METRICS

PASSING = """
import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


def test_first():
    pass


def test_second():
    pass
"""


def _signalled(how: str) -> str:
    """A module whose second test is interrupted, as `how` (a signal, a swallowed one) does it."""
    return f"""
import gc, os, signal, time

import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


class Finalizer:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)  # raised in a finalizer: Python prints and drops it


def test_first():
    pass


def test_interrupted():
    how = {how!r}
    if how == "swallowed":
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass  # a library that catches it
    elif how == "finalizer":
        Finalizer()
        gc.collect()
    elif how == "exit":
        pytest.exit("the operator stopped it")
    else:
        os.kill(os.getpid(), getattr(signal, how))
        time.sleep(5)


def test_after():
    pass
"""


def _cpu_project(pytester: pytest.Pytester, tests: str = PASSING) -> pytest.Pytester:
    pytester.makeconftest(fake_devices.discovery_conftest())
    pytester.makepyfile(test_cases=tests)
    return pytester


def _outputs(pytester: pytest.Pytester) -> tuple[str, ...]:
    return (
        f"--rocm-report={pytester.path / 'report.json'}",
        f"--rocm-summary={pytester.path / 'summary.md'}",
        f"--junitxml={pytester.path / 'junit.xml'}",
    )


def _report(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "report.json").read_text())


def _summary(pytester: pytest.Pytester) -> str:
    return (pytester.path / "summary.md").read_text()


def _junit(pytester: pytest.Pytester) -> tuple[dict[str, str], str]:
    """The testsuite's counts and its verdict property."""
    root = ElementTree.parse(pytester.path / "junit.xml").getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    verdict = next((p.get("value", "") for p in suite.iter("property") if p.get("name") == "rocm_validate.verdict"), "")
    return dict(suite.attrib), verdict


def _verdict_line(result: pytest.RunResult) -> str:
    return next((line for line in result.outlines if line.startswith("rocm-validate verdict:")), "")


# --- 1. Ctrl-C, SIGTERM, pytest.exit: never a pass ---------------------------------------------


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "swallowed", "finalizer", "exit"])
def test_an_interrupted_run_counts_no_interrupted_test_passed_and_every_output_says_interrupted(
    pytester: pytest.Pytester, how: str
) -> None:
    _cpu_project(pytester, _signalled(how))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *_outputs(pytester))
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-2000:]
    outcomes = {t["nodeid"].split("::")[-1]: t["outcome"] for t in _report(pytester)["tests"]}
    assert outcomes.get("test_interrupted") != "passed" and "test_after" not in outcomes
    pytest_counts = {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "skipped", "failed")}
    report = _report(pytester)
    assert report["summary"] == pytest_counts
    assert "interrupted" in report["verdict"] and "pass:" not in report["verdict"]
    assert "INTERRUPTED" in _summary(pytester).splitlines()[0]
    counts, verdict = _junit(pytester)
    assert int(counts["tests"]) == sum(pytest_counts.values()) and "interrupted" in verdict
    assert "interrupted" in _verdict_line(result)


# --- 2. Nothing validated, nothing recorded -------------------------------------------------------

SKIPPING = """
import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


def test_needs_a_gpu():
    pytest.skip("needs a GPU, found the CPU")
"""


def test_a_run_that_validated_nothing_says_so_in_every_output(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester, SKIPPING)
    result = pytester.runpytest("-p", "no:cacheprovider", *_outputs(pytester))
    assert "nothing was validated" in _verdict_line(result)
    assert "nothing was validated" in _report(pytester)["verdict"]
    assert "nothing was validated" in _summary(pytester).splitlines()[0]
    assert "passed" not in _summary(pytester).splitlines()[0]
    assert "nothing was validated" in _junit(pytester)[1]


def test_a_run_that_selected_no_test_says_nothing_was_validated(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "no_such_test", *_outputs(pytester))
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "nothing was validated" in _summary(pytester).splitlines()[0]
    assert "nothing was validated" in _report(pytester)["verdict"]


NOISY = """
import pytest

pytestmark = pytest.mark.rocm_suite("perf")


def test_noisy(perf, timed):
    perf.throughput("gemm.bf16.8192x8192x8192", timed(0.0015, spread=0.4), 2 * 8192**3, "TFLOP/s", peak="bf16")
"""


def _perf_project(pytester: pytest.Pytester, tests: str) -> pytest.Pytester:
    pytester.makeconftest(PERF_CONFTEST)
    pytester.makepyfile(test_perf=tests)
    (pytester.path / "baselines").mkdir()
    return pytester


def _perf_run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--rocm-suite=perf", f"--rocm-baselines={pytester.path / 'baselines'}", "-p", "no:cacheprovider", *args
    )


def test_update_baselines_that_recorded_nothing_never_says_pass(pytester: pytest.Pytester) -> None:
    _perf_project(pytester, NOISY)
    result = _perf_run(pytester, "--update-baselines", *_outputs(pytester))
    verdict = _verdict_line(result)
    assert "nothing was recorded" in verdict and "pass" not in verdict.split(";")[0]
    assert "nothing was recorded" in _summary(pytester).splitlines()[0]
    assert "nothing was recorded" in _report(pytester)["verdict"]


def test_update_baselines_that_recorded_nothing_fails_under_strict(pytester: pytest.Pytester) -> None:
    _perf_project(pytester, NOISY)
    result = _perf_run(pytester, "--update-baselines", "--rocm-strict")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "nothing was recorded" in _verdict_line(result)


def test_update_baselines_says_how_many_entries_it_recorded(pytester: pytest.Pytester) -> None:
    _perf_project(pytester, TWO_METRICS)
    result = _perf_run(pytester, "--update-baselines", *_outputs(pytester))
    assert result.ret == 0
    assert "recorded 2 baseline entries" in _verdict_line(result)
    assert "recorded 2 baseline entries" in _summary(pytester)


# --- 3. Empty values of options --------------------------------------------------------------------


def _valued_options(pytester: pytest.Pytester) -> list[str]:
    """Every rocm-validate option that takes a value, as `pytest --help` lists it ('--rocm-suite=LIST')."""
    shown = pytester.runpytest("--help").stdout.str()
    return sorted(set(re.findall(r"^\s+(--rocm-[a-z0-9-]+)=", shown, re.M)))


def test_every_option_that_takes_a_value_refuses_an_empty_one_naming_itself(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester)
    options = _valued_options(pytester)
    assert {"--rocm-report", "--rocm-summary", "--rocm-baselines", "--rocm-benchmark-json", "--rocm-floors"} <= set(
        options
    )
    handled = []
    for option in options:
        result = pytester.runpytest("-p", "no:cacheprovider", f"{option}=")
        if result.ret == pytest.ExitCode.USAGE_ERROR and f"{option}=''" in result.stderr.str():
            handled.append(option)
    assert handled == options


def test_an_empty_summary_path_names_the_unset_step_summary_variable(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    _cpu_project(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--rocm-summary=")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-summary='': *GITHUB_STEP_SUMMARY is unset here*"])


def test_an_empty_baselines_folder_never_records_into_the_current_directory(pytester: pytest.Pytester) -> None:
    _perf_project(pytester, NOISY)
    result = pytester.runpytest(
        "--rocm-suite=perf", "--rocm-baselines=", "--update-baselines", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not list(pytester.path.glob("*.json")) and not list(pytester.path.glob("*.lock"))


# --- 4. Output files: proven writable, never stale, never half written ------------------------------


def test_a_report_path_in_a_place_no_file_can_be_created_is_a_usage_error_at_the_start(
    pytester: pytest.Pytester,
) -> None:
    _cpu_project(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--rocm-report=/proc/x.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-report='/proc/x.json': cannot write there: *"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def _failing(call: Callable, name: str, code: int) -> Callable:
    """`call`, failing with `code` when the path it creates or replaces ends with `name` (the
    target, os.replace's second argument, else its first)."""
    target = 1 if call is os.replace else 0

    def patched(*args, **kwargs):
        if str(args[target]).endswith(name):
            raise OSError(code, os.strerror(code), str(args[target]))
        return call(*args, **kwargs)

    return patched


@pytest.mark.parametrize(
    ("option", "name"),
    [("--rocm-report", "report.json"), ("--rocm-benchmark-json", "benchmarks.json")],
)
def test_a_json_output_that_cannot_be_written_at_the_end_is_one_line_and_keeps_the_exit_status(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, option: str, name: str
) -> None:
    _cpu_project(pytester)
    monkeypatch.setattr(os, "replace", _failing(os.replace, name, errno.ENOSPC))
    result = pytester.runpytest("-p", "no:cacheprovider", f"{option}={pytester.path / name}")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"rocm-validate *: could not write {pytester.path / name}: No space left on device*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not list(pytester.path.glob(f"*{name}*"))


def test_a_summary_that_cannot_be_appended_at_the_end_keeps_what_the_file_held(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cpu_project(pytester)
    summary = pytester.path / "summary.md"
    summary.write_text("## an earlier step\n")
    real_fsync = os.fsync

    def full_disk(descriptor: int) -> None:
        if os.readlink(f"/proc/self/fd/{descriptor}") == str(summary):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", full_disk)
    result = pytester.runpytest("-p", "no:cacheprovider", f"--rocm-summary={summary}")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"rocm-validate summary: could not write {summary}: No space left on device*"])
    assert summary.read_text() == "## an earlier step\n"


def test_a_run_stopped_by_a_usage_error_leaves_no_earlier_report_behind(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester)
    for name in ("report.json", "junit.xml", "benchmarks.json"):
        (pytester.path / name).write_text("last week: passed")
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        f"--rocm-report={pytester.path / 'report.json'}",
        f"--junitxml={pytester.path / 'junit.xml'}",
        f"--rocm-benchmark-json={pytester.path / 'benchmarks.json'}",
        "--rocm-level=sometimes",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [p.name for p in pytester.path.glob("*") if p.read_text() == "last week: passed"] == []


def test_a_run_stopped_by_a_usage_error_says_so_at_the_end_of_the_summary(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester)
    summary = pytester.path / "summary.md"
    summary.write_text("## rocm-validate: passed (exit status 0)\n")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--rocm-summary={summary}", "--rocm-level=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    headings = [line for line in summary.read_text().splitlines() if line.startswith("## ")]
    assert "nothing was validated" in headings[-1] and "--rocm-level" in summary.read_text()


def test_a_report_named_as_a_pipe_or_device_is_refused_and_left_alone(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester)
    pipe = pytester.path / "report.json"
    os.mkfifo(pipe)  # as /dev/stdout or /dev/null would be (never touched here: the old code replaced them)
    result = pytester.runpytest("-p", "no:cacheprovider", f"--rocm-report={pipe}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and pipe.is_fifo()
    result.stderr.fnmatch_lines([f"ERROR: --rocm-report='{pipe}' is not a regular file (a device or a pipe)*"])


def test_two_outputs_naming_one_file_are_a_usage_error(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--rocm-report=out", "--rocm-summary=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rocm-summary='out': --rocm-report='out' writes * too*"])


def test_the_summary_is_appended_to_the_file_a_ci_step_summary_collects(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester)
    summary = pytester.path / "summary.md"
    summary.write_text("## the build step\n")
    pytester.runpytest("-p", "no:cacheprovider", f"--rocm-summary={summary}").assert_outcomes(passed=2)
    text = summary.read_text()
    assert text.startswith("## the build step\n") and "rocm-validate: passed" in text


# --- 5. A baseline or RCP that cannot be written fails that test; the run goes on -----------------

TWO_RECORDINGS = """
import pytest

pytestmark = pytest.mark.rocm_suite("perf")


def test_gemm(perf, timed):
    perf.throughput("gemm.bf16.8192x8192x8192", timed(0.0015), 2 * 8192**3, "TFLOP/s", peak="bf16")


def test_after(perf, timed):
    perf.throughput("copy.device.2048mib", timed(0.001), 2 * 2**31, "GB/s", peak="memory")
"""


@pytest.mark.parametrize(
    ("call", "code"),
    [("replace", errno.ENOSPC), ("replace", errno.EPERM), ("open", errno.EROFS)],
    ids=["full-disk", "file-not-replaceable", "folder-turned-read-only"],
)
def test_a_baselines_file_that_cannot_be_written_fails_the_test_and_the_run_goes_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, call: str, code: int
) -> None:
    _perf_project(pytester, TWO_RECORDINGS)
    stored = pytester.path / "baselines" / f"{PERF_KEY}.json"
    stored.write_text(json.dumps({"schema": "rocm-validate/baselines/1", "device_key": PERF_KEY, "metrics": {}}))
    before = stored.read_text()
    suffix = ".json" if call == "replace" else ".json.lock"
    monkeypatch.setattr(os, call, _failing(getattr(os, call), f"{PERF_KEY}{suffix}", code))
    result = _perf_run(pytester, "--update-baselines", *_outputs(pytester))
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([f"*cannot write {stored}: {os.strerror(code)}*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert stored.read_text() == before
    assert [t["category"] for t in _report(pytester)["tests"]] == ["configuration", "configuration"]
    assert "FAILED" in _summary(pytester).splitlines()[0]


def _convergence_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    target = pytester.path / "suites" / "convergence"
    target.mkdir(parents=True)
    for source in CONVERGENCE_SUITE.glob("test_*.py"):
        (target / source.name).write_text(source.read_text())
    return pytester


def test_an_rcp_file_that_cannot_be_written_fails_the_recording_naming_it_and_leaves_nothing_partial(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rocm_validate.convergence.rcps import rcp_path
    from rocm_validate.platform.devices import discover_cpu

    _convergence_suite(pytester)
    baselines = pytester.path / "baselines"
    stored = rcp_path(baselines, discover_cpu(None, {}).device_key)
    monkeypatch.setattr(os, "replace", _failing(os.replace, stored.name, errno.ENOSPC))
    result = pytester.runpytest(
        "--rocm-suite=convergence",
        "--rocm-device=cpu",
        f"--rocm-baselines={baselines}",
        "--rocm-convergence-seeds=3",
        "--update-baselines",
        "-k",
        "test_reference_records_convergence_points",
        "-p",
        "no:cacheprovider",
        *_outputs(pytester),
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*cannot write {stored}: No space left on device*"])
    assert list(stored.parent.iterdir()) == [] and "INTERNALERROR" not in result.stdout.str()
    assert _report(pytester)["tests"][0]["category"] == "configuration"
    assert "roll back" not in _verdict_line(result)


# --- 6. Configuration problems are categorised so, and the verdict says what to fix --------------

MISSING_BASELINE = """
import pytest

pytestmark = pytest.mark.rocm_suite("perf")


def test_attention(perf, timed):
    perf.throughput("sdpa.forward.bert-large.48x16x512x64", timed(0.0002), 5.2e10, "TFLOP/s")
"""


def test_a_missing_baseline_under_strict_is_configuration_and_the_verdict_says_to_record_it(
    pytester: pytest.Pytester,
) -> None:
    _perf_project(pytester, MISSING_BASELINE)
    result = _perf_run(pytester, "--rocm-strict", *_outputs(pytester))
    result.assert_outcomes(failed=1)
    verdict = _verdict_line(result)
    assert "install or repair" not in verdict and "roll back" not in verdict
    assert "--update-baselines" in verdict
    assert _report(pytester)["tests"][0]["category"] == "configuration"


def test_a_baseline_in_another_unit_is_configuration_and_the_verdict_says_to_rerecord_it(
    pytester: pytest.Pytester,
) -> None:
    _perf_project(pytester, TWO_METRICS)
    _perf_run(pytester, "--update-baselines").assert_outcomes(passed=2)
    stored = pytester.path / "baselines" / f"{PERF_KEY}.json"
    data = json.loads(stored.read_text())
    data["metrics"]["gemm.bf16.8192x8192x8192"]["unit"] = "GB/s"
    stored.write_text(json.dumps(data))
    result = _perf_run(pytester, *_outputs(pytester))
    result.assert_outcomes(passed=1, failed=1)
    verdict = _verdict_line(result)
    assert "install or repair" not in verdict and "roll back" not in verdict and "re-record" in verdict
    assert "configuration" in [t["category"] for t in _report(pytester)["tests"]]


COLLECTIVES = Path(__file__).resolve().parents[1] / "suites" / "collectives" / "test_collectives.py"
UNREACHABLE = """
import socket

import pytest

import rocm_validate.collectives.launch as launch

real = launch.rank_env


def _closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_env(env, world, rank, port, run_id):
    found = real(env, world, rank, port, run_id)
    return {**found, "MASTER_PORT": str(_closed_port())} if rank == 1 else found


@pytest.fixture(scope="session", autouse=True)
def unreachable():
    patch = pytest.MonkeyPatch()
    patch.setattr(launch, "rank_env", rank_env)  # undone after the run: the launcher is shared in-process
    yield
    patch.undo()
"""


def test_a_rendezvous_a_rank_cannot_reach_is_configuration_never_a_software_regression(
    pytester: pytest.Pytester,
) -> None:
    folder = pytester.mkdir("suites") / "collectives"
    folder.mkdir()
    (folder / "test_collectives.py").write_text(COLLECTIVES.read_text())
    (folder / "conftest.py").write_text(UNREACHABLE)
    result = pytester.runpytest(
        "suites/collectives",
        "--rocm-device=cpu",
        "--rocm-collective-timeout=3",
        "-k",
        "expected_result or pair",
        "-p",
        "no:cacheprovider",
        *_outputs(pytester),
    )
    verdict = _verdict_line(result)
    assert "roll back" not in verdict and "software regression" not in verdict and "rendezvous" in verdict
    failed = [t for t in _report(pytester)["tests"] if t["outcome"] == "failed"]
    assert failed and {t["category"] for t in failed} == {"configuration"}


def test_garbage_mlperf_logs_are_configuration_never_a_software_regression(pytester: pytest.Pytester) -> None:
    _convergence_suite(pytester)
    runs = pytester.mkdir("runs")
    for index in range(3):
        (runs / f"result_{index}.txt").write_text("not an MLPerf log\n")
    result = pytester.runpytest(
        "--rocm-suite=convergence", "--rocm-device=cpu", f"--rocm-mlperf-results={runs}", "-k", "mlperf"
    )
    verdict = _verdict_line(result)
    assert "roll back" not in verdict and "inputs:" in verdict


def test_mlperf_logs_under_the_wrong_ruleset_stop_the_run_naming_the_ruleset(pytester: pytest.Pytester) -> None:
    _convergence_suite(pytester)
    runs = write_set(pytester.path / "runs", [172_000] * 3, writer=write_llama31_8b_run)
    result = pytester.runpytest(
        "--rocm-suite=convergence", "--rocm-device=cpu", f"--rocm-mlperf-results={runs}", "--rocm-ruleset=4.1.0"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "roll back" not in result.stdout.str()
    result.stderr.fnmatch_lines(["ERROR: --rocm-mlperf-results=*ruleset*"])


# --- 9. Strict mode, floors, named tests, messages --------------------------------------------------


def test_strict_with_a_host_root_holding_no_proc_or_sys_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester)
    root = pytester.mkdir("empty-root")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--rocm-suite=preflight", "--rocm-strict", f"--rocm-host-root={root}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --rocm-host-root={root} holds no proc/ and no sys/*"])


def _floors(pytester: pytest.Pytester, name: str) -> Path:
    folder = pytester.mkdir("floors")
    row = {
        "value": 1.0,
        "unit": "TFLOP/s",
        "better": "higher",
        "dispersion": None,
        "samples": None,
        "provenance": {"date": "2026-11-23"},
    }
    (folder / f"{PERF_KEY}.json").write_text(
        json.dumps({"schema": "rocm-validate/baselines/1", "device_key": PERF_KEY, "metrics": {name: row}})
    )
    return folder


def test_a_floor_that_names_no_recorded_metric_is_a_usage_error_naming_the_closest(pytester: pytest.Pytester) -> None:
    _perf_project(pytester, TWO_METRICS)
    folder = _floors(pytester, "gemm.bf16.8192x8192x8193")
    result = _perf_run(pytester, f"--rocm-floors={folder}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rocm-floors: *gemm.bf16.8192x8192x8193 (closest: gemm.bf16.8192x8192x8192)*"]
    )


LEVELLED = """
import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


@pytest.mark.rocm_level("extended")
def test_long():
    pass


def test_short():
    pass
"""


@pytest.mark.parametrize(
    ("named", "args", "why"),
    [
        ("test_cases.py::test_long", (), "*rocm-level=extended*"),
        ("test_cases.py::test_short", ("--rocm-suite=perf",), "*rocm-suite=correctness,perf*"),
    ],
    ids=["removed-by-the-level", "removed-by-the-suite"],
)
def test_a_named_test_the_selection_removes_is_a_usage_error_saying_why(
    pytester: pytest.Pytester, named: str, args: tuple[str, ...], why: str
) -> None:
    _cpu_project(pytester, LEVELLED)
    result = pytester.runpytest("-p", "no:cacheprovider", named, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {named}*{why}"])


LONG_FAILURE = """
import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


def test_long_message():
    pytest.fail("the rendezvous at 127.0.0.1 could not be reached " * 20, pytrace=False)
"""


def test_a_long_failure_in_the_summary_is_cut_at_a_word_with_an_ellipsis(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester, LONG_FAILURE)
    summary = pytester.path / "summary.md"
    pytester.runpytest("-p", "no:cacheprovider", f"--rocm-summary={summary}")
    row = next(line for line in summary.read_text().splitlines() if "test_long_message" in line)
    cell = row.split("|")[-2].strip()
    original = "the rendezvous at 127.0.0.1 could not be reached " * 20
    kept = cell.removesuffix("…")
    assert cell.endswith("…") and original.startswith(kept) and original[len(kept)] == " "


# --- 10. mlperf-score: one run per file, one benchmark per set, nothing unread reads as compliant ----


def _mlperf_score(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    from rocm_validate.cli.main import main

    status = main(["mlperf-score", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err.strip()


def test_a_log_holding_two_benchmarks_is_named_and_not_accepted_and_shows_neither_runs_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_set(tmp_path / "bert", [2_450_000 + 10_000 * i for i in range(10)], batch=448)
    llama = write_llama31_8b_run(tmp_path / "llama.txt", 3_000_000)
    (folder / "result_0.txt").write_text((folder / "result_0.txt").read_text() + llama.read_text())
    _, out, err = _mlperf_score(capsys, folder, "--no-compliance")
    row = next(line for line in out.splitlines() if line.startswith("result_0.txt"))
    assert row.split()[1] == "unreadable" and "3.2900" not in row and "KeyError" not in out + err
    assert re.search(r"result_0.txt: holds runs of 2 benchmarks \('bert' at line \d+, 'llama31_8b' at line \d+\)", out)


def test_runs_of_two_benchmarks_in_one_set_are_refused_naming_the_files_of_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_set(tmp_path / "runs", [2_450_000] * 3, batch=448)
    write_llama31_8b_run(folder / "result_3.txt", 3_000_000)
    status, out, err = _mlperf_score(capsys, folder, "--no-compliance")
    assert status == 2 and out == "" and len(err.splitlines()) == 1
    assert (
        "holds runs of 2 benchmarks (bert: result_0.txt, result_1.txt, result_2.txt; llama31_8b: result_3.txt)" in err
    )


@pytest.mark.parametrize("text", ["", "garbage\n", ":::MLLOG {not json\n"], ids=["empty", "garbage", "broken"])
def test_an_unreadable_log_never_shows_compliance_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for index in range(3):
        (folder / f"result_{index}.txt").write_text(text)
    _, out, _ = _mlperf_score(capsys, folder)
    rows = [line for line in out.splitlines() if line.startswith("result_")]
    assert len(rows) == 3 and all(row.split()[1] == "unreadable" and row.endswith("not checked") for row in rows)
    _, out, _ = _mlperf_score(capsys, folder, "--json")
    assert all(run["compliance"] and run["compliance"][0].startswith("not checked") for run in json.loads(out)["runs"])


# --- 11. Options and files: a tiny timeout, a disabled plugin, a foreign ini, a misspelled entry ----


@pytest.mark.parametrize("value", ["0.001", "1e-9", "0.5"])
def test_a_timeout_too_short_for_pytest_itself_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    _cpu_project(pytester)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--rocm-timeout={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "INTERNALERROR" not in result.stdout.str()
    result.stderr.fnmatch_lines([f"ERROR: --rocm-timeout='{value}': expected at least 1 second*"])


def test_the_suites_with_the_plugin_turned_off_stop_once_with_one_line(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("-p", "no:rocm_validate", "-p", "no:cacheprovider", str(ROOT / "suites"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(["ERROR: the suites need the rocm_validate plugin, which '-p no:rocm_validate'*"])


ROOT = Path(__file__).resolve().parents[1]
GEMM_SUITE_FILE = ROOT / "suites" / "correctness" / "test_gemm.py"


def _gemm_checks(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The bf16 GEMM checks of the correctness suite, run from a folder of another project."""
    return pytester.runpytest_subprocess(
        *args,
        "-p",
        "no:cacheprovider",
        "--rocm-device=cpu",
        f"--rocm-baselines={ROOT / 'baselines'}",
        "-k",
        "test_gemm and bfloat16",
        str(GEMM_SUITE_FILE),
    )


def test_the_suites_under_a_foreign_ini_keep_their_suites_header_and_verdict(pytester: pytest.Pytester) -> None:
    (pytester.path / "other.ini").write_text("[pytest]\n")
    result = _gemm_checks(pytester, "-c", str(pytester.path / "other.ini"))
    assert result.ret == pytest.ExitCode.OK
    assert any(line.startswith("rocm-validate device: ") for line in result.outlines)
    assert _verdict_line(result) == "rocm-validate verdict: pass: every check that ran passed on the host"


def test_a_strict_ini_value_that_is_no_truth_value_names_the_key(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester)
    pytester.makeini("[pytest]\nrocm_strict = maybe\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: rocm_strict in *tox.ini: invalid truth value 'maybe'; expected true or false*"]
    )


def test_the_rerun_command_keeps_the_test_paths_and_the_k_expression(pytester: pytest.Pytester) -> None:
    result = _gemm_checks(pytester)
    rerun = next(line for line in result.outlines if line.startswith("rocm-validate rerun: "))
    assert rerun.endswith(f" -k 'test_gemm and bfloat16' {GEMM_SUITE_FILE}")


def _baselines(pytester: pytest.Pytester, name: str) -> None:
    row = {"value": 1.0, "unit": "TFLOP/s", "better": "higher", "dispersion": 0.01, "samples": 10}
    entry = {**row, "provenance": {"date": "2026-11-23"}}
    (pytester.path / "baselines" / f"{PERF_KEY}.json").write_text(
        json.dumps({"schema": "rocm-validate/baselines/1", "device_key": PERF_KEY, "metrics": {name: entry}})
    )


def test_a_misspelled_baseline_entry_is_a_usage_error_naming_the_metric_it_misses(pytester: pytest.Pytester) -> None:
    _perf_project(pytester, TWO_METRICS)
    _baselines(pytester, "gemm.bf16.8192x8192x8193")
    result = _perf_run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rocm-baselines: *gemm.bf16.8192x8192x8193 (closest: gemm.bf16.8192x8192x8192)*"]
    )


def test_a_misspelled_baseline_entry_in_a_partial_run_is_a_warning(pytester: pytest.Pytester) -> None:
    _perf_project(pytester, TWO_METRICS)
    _baselines(pytester, "gemm.bf16.8192x8192x8193")
    result = _perf_run(pytester, "-k", "gemm")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["rocm-validate perf: 1 baseline entry(ies) of * gated nothing: *8193 (closest: *8192)"]
    )


def test_a_baseline_entry_of_a_metric_not_measured_here_is_no_misspelling(pytester: pytest.Pytester) -> None:
    _perf_project(pytester, TWO_METRICS)
    _baselines(pytester, "sdpa.forward.bert-large.48x16x512x64")
    assert _perf_run(pytester).ret == pytest.ExitCode.OK


# --- 12. A test file that cannot be imported, a fixture of the user's that raises ------------------

UNIMPORTABLE = """
import no_such_module_anywhere

import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


def test_never_collected():
    pass
"""


@pytest.mark.parametrize("workers", [(), ("-n", "1")], ids=["plain", "xdist"])
def test_a_test_file_that_cannot_be_imported_is_named_as_configuration_never_an_interruption(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    _cpu_project(pytester)
    pytester.makepyfile(test_broken=UNIMPORTABLE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *workers, *_outputs(pytester))
    assert result.ret != pytest.ExitCode.OK
    verdict = _report(pytester)["verdict"]
    assert verdict.startswith(
        "rocm-validate verdict: a test file could not be imported: test_broken.py: ModuleNotFoundError: No module "
        "named 'no_such_module_anywhere' (configuration)"
    )
    assert "interrupted" not in verdict and "interrupted" not in _verdict_line(result)
    broken = next(t for t in _report(pytester)["tests"] if t["nodeid"] == "test_broken.py")
    assert (broken["outcome"], broken["category"]) == ("error", "configuration")


USER_FIXTURE = """
import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


@pytest.fixture
def dataset():
    raise FileNotFoundError("/data/corpus.bin")


def test_reads_the_dataset(dataset):
    pass
"""


def test_an_exception_in_a_users_fixture_is_configuration_never_roll_back_the_image(
    pytester: pytest.Pytester,
) -> None:
    _cpu_project(pytester, USER_FIXTURE)
    result = pytester.runpytest("-p", "no:cacheprovider", *_outputs(pytester))
    (test,) = _report(pytester)["tests"]
    assert (test["outcome"], test["category"]) == ("error", "configuration")
    assert test["fix"].startswith("fix the fixture dataset (") and "raised before the test ran" in test["fix"]
    assert "roll back" not in _verdict_line(result) and "crash" not in _verdict_line(result)


# --- 13. A test that ends the process ------------------------------------------------------------

ENDS_THE_PROCESS = """
import os
import threading

import pytest

pytestmark = pytest.mark.rocm_suite("correctness")


def test_ends_the_process():
    if os.environ.get("FROM_A_THREAD"):
        thread = threading.Thread(target=os._exit, args=(0,))
        thread.start()
        thread.join()
    os._exit(0)


def test_after():
    pass
"""


def test_os_exit_in_a_test_fails_that_test_and_the_run_goes_on_to_its_verdict(pytester: pytest.Pytester) -> None:
    _cpu_project(pytester, ENDS_THE_PROCESS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *_outputs(pytester))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = {t["nodeid"].split("::")[-1]: (t["outcome"], t["message"]) for t in _report(pytester)["tests"]}
    assert outcomes["test_after"][0] == "passed"
    assert outcomes["test_ends_the_process"][0] == "failed"
    assert "test_ends_the_process called os._exit(0)" in outcomes["test_ends_the_process"][1]
    assert "pass" not in _verdict_line(result).split(":")[1]


def test_os_exit_0_from_a_thread_of_a_test_never_ends_the_run_green(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FROM_A_THREAD", "1")
    _cpu_project(pytester, ENDS_THE_PROCESS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *_outputs(pytester))
    assert result.ret == 1
    result.stderr.fnmatch_lines(
        ["rocm-validate: *test_ends_the_process ended the process with os._exit(0) from a thread*"]
    )
