"""The perf plugin end to end with pytester: a fake MI300X, synthetic timings whose speed the
test controls (SLOWDOWN), and real baseline files, gates, reports and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

REPO = Path(__file__).resolve().parents[1]
KEY = "amd-instinct-mi300x-gfx942"
MISSING = f"no baseline for sdpa.forward.bert-large.48x16x512x64 on {KEY}; run pytest --rocm-suite=perf"

CONFTEST = '''
import os

import pytest

from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.perf.recorder import Measurement
from rocm_validate.perf.stats import SampleSummary
from rocm_validate.perf.timing import Timing
from rocm_validate.platform.clocks import ClockWindow

MIB = 1024 * 1024


def pytest_rocm_discover_devices(config):
    """A stand-in MI300X (there is no GPU here), then the CPU."""
    return [
        DeviceInfo(backend="rocm", index=0, name="AMD Instinct MI300X", arch="gfx942",
                   device_key="amd-instinct-mi300x-gfx942", memory_bytes=192 * 1024 * MIB,
                   l2_cache_bytes=4 * MIB, last_level_cache_bytes=256 * MIB),
        DeviceInfo(backend="cpu", index=None, name="Test CPU", arch="Test CPU", device_key="cpu-test"),
    ]


@pytest.fixture
def timed():
    """timed(seconds, spread=0) -> 12 rounds around `seconds` per call, slowed by $SLOWDOWN."""
    def make(seconds, spread=0.0):
        factor = float(os.environ.get("SLOWDOWN", "1"))
        samples = tuple(seconds * factor * (1 + spread * ((i % 3) - 1)) for i in range(12))
        clock = None
        if os.environ.get("CLOCK_MHZ"):  # a made-up window clock: there is no GPU to sample here
            mhz, capped = float(os.environ["CLOCK_MHZ"]), float(os.environ.get("CAPPED", "0"))
            clock = ClockWindow(mhz, mhz, mhz, 100, capped, ("sw-power-cap",) if capped else ())
        return Measurement(Timing(SampleSummary(samples, 1), "synthetic", 0.0, True), {}, clock)
    return make
'''

TWO_METRICS = """
import pytest

pytestmark = pytest.mark.rocm_suite("perf")


def test_gemm(perf, timed):
    perf.throughput("gemm.bf16.8192x8192x8192", timed(0.0015), 2 * 8192**3, "TFLOP/s", peak="bf16")


def test_copy(perf, timed):
    perf.throughput("copy.device.2048mib", timed(0.001), 2 * 2**31, "GB/s", peak="memory")
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_metrics=TWO_METRICS)
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # subprocess runs import this checkout's rocm_validate
    monkeypatch.delenv("SLOWDOWN", raising=False)
    (pytester.path / "baselines").mkdir()
    return pytester


def run(pytester: pytest.Pytester, *args: str, slowdown: float = 1.0) -> pytest.RunResult:
    os.environ["SLOWDOWN"] = str(slowdown)
    try:
        return pytester.runpytest(
            "--rocm-suite=perf", f"--rocm-baselines={pytester.path / 'baselines'}", "-p", "no:cacheprovider", *args
        )
    finally:
        del os.environ["SLOWDOWN"]


def baseline_file(pytester: pytest.Pytester) -> Path:
    return pytester.path / "baselines" / f"{KEY}.json"


def stored(pytester: pytest.Pytester) -> dict:
    return json.loads(baseline_file(pytester).read_text())["metrics"]


def recorded(project: pytest.Pytester) -> pytest.Pytester:
    run(project, "--update-baselines").assert_outcomes(passed=2)
    return project


NO_FLOOR = """
import pytest


@pytest.mark.rocm_suite("perf")
def test_attention(perf, timed):
    perf.throughput("sdpa.forward.bert-large.48x16x512x64", timed(0.0002), 5.2e10, "TFLOP/s")
"""


def test_a_metric_with_neither_baseline_nor_floor_is_skipped_with_the_command_that_records_it(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_no_floor=NO_FLOOR)
    result = run(project, "test_no_floor.py")
    result.assert_outcomes(skipped=1)
    assert result.ret == 0
    # the command carries the run's own device and baselines folder
    result.stdout.fnmatch_lines(
        [f"*{MISSING} --rocm-device=0 --rocm-baselines={project.path / 'baselines'} --update-baselines"]
    )


def test_rocm_strict_turns_a_missing_baseline_into_a_failure(project: pytest.Pytester) -> None:
    project.makepyfile(test_no_floor=NO_FLOOR)
    result = run(project, "--rocm-strict", "test_no_floor.py")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines([f"*{MISSING}*(--rocm-strict: a check that was not validated fails)*"])


def test_the_header_names_the_baseline_file_and_the_floors_the_run_uses(project: pytest.Pytester) -> None:
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"rocm-validate perf: baselines *{KEY}.json (none yet); floors: the shipped table for "
            "AMD Instinct MI300X; default thresholds; window x1"
        ]
    )


def test_a_fresh_node_is_gated_by_its_skus_floors_from_the_first_run(project: pytest.Pytester) -> None:
    result = run(project, "--rocm-report=report.json")
    result.assert_outcomes(passed=2)
    metrics = {m["name"]: m for m in json.loads((project.path / "report.json").read_text())["metrics"]}
    assert {m["verdict"] for m in metrics.values()} == {"floor-pass"}
    assert metrics["gemm.bf16.8192x8192x8192"]["extra"]["gate"]["floor_value"] == 552.0
    result.stdout.fnmatch_lines(["rocm-validate perf gated by a baseline: 0, by a floor only: 2, by neither: 0"])


def test_a_first_recording_states_each_floor_verdict_in_the_report(project: pytest.Pytester) -> None:
    run(project, "--update-baselines", "--rocm-report=report.json", slowdown=1.2).assert_outcomes(passed=1, failed=1)
    gates = {m["name"]: m["extra"]["gate"] for m in json.loads((project.path / "report.json").read_text())["metrics"]}
    assert {name: g["floor_verdict"] for name, g in gates.items()} == {
        "gemm.bf16.8192x8192x8192": "floor-pass",
        "copy.device.2048mib": "below-floor",
    }


def test_a_node_below_its_skus_floor_fails_naming_the_floors_source(project: pytest.Pytester) -> None:
    result = run(project, slowdown=1.2)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*copy.device.2048mib: below the floor: 3579 GB/s vs the floor 4177 (ratio 0.857; "
            "AMD MI300X system acceptance*BabelStream copy)*"
        ]
    )


def test_a_metric_inside_its_baselines_band_but_below_the_floor_fails(project: pytest.Pytester) -> None:
    recorded(project)
    floors = project.mkdir("floors")
    (floors / f"{KEY}.json").write_text(
        json.dumps(
            {
                "schema": "rocm-validate/baselines/1",
                "device_key": KEY,
                "metrics": {
                    "gemm.bf16.8192x8192x8192": {
                        "value": 900.0,
                        "unit": "TFLOP/s",
                        "better": "higher",
                        "dispersion": None,
                        "samples": None,
                        "provenance": {"date": "2026-11-23", "source": "our fleet"},
                    }
                },
            }
        )
    )
    result = run(project, f"--rocm-floors={floors}")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["*gemm.bf16.8192x8192x8192: below the floor: 733 TFLOP/s vs the floor 900 (ratio 0.814; our fleet)*"]
    )


@pytest.mark.parametrize(
    "entry, complaint",
    [
        ({"value": -1.0}, "does not match the rocm-validate floors schema"),
        ({"value": "fast"}, "does not match the rocm-validate floors schema"),
        ({"name": "gemn.bf16.8192x8192x8192"}, "floor 'gemn.bf16.8192x8192x8192' names no metric the suites record"),
    ],
)
def test_a_bad_floors_file_is_a_usage_error_naming_the_file_and_entry(
    project: pytest.Pytester, entry: dict, complaint: str
) -> None:
    floors = project.mkdir("floors")
    row = {
        "value": 500.0,
        "unit": "TFLOP/s",
        "better": "higher",
        "dispersion": None,
        "samples": None,
        "provenance": {"date": "2026-11-23"},
    }
    name = entry.pop("name", "gemm.bf16.8192x8192x8192")
    row.update(entry)
    (floors / f"{KEY}.json").write_text(
        json.dumps({"schema": "rocm-validate/baselines/1", "device_key": KEY, "metrics": {name: row}})
    )
    result = run(project, f"--rocm-floors={floors}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: *{KEY}.json*{complaint}*"])


def test_a_floor_file_with_infinity_is_refused(project: pytest.Pytester) -> None:
    floors = project.mkdir("floors")
    (floors / f"{KEY}.json").write_text(
        f'{{"schema": "rocm-validate/baselines/1", "device_key": "{KEY}", "metrics": {{"gemm.bf16.8192x8192x8192": '
        '{"value": Infinity, "unit": "TFLOP/s", "better": "higher", "dispersion": null, "samples": null, '
        '"provenance": {"date": "x"}}}}'
    )
    result = run(project, f"--rocm-floors={floors}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *contains Infinity, which is not JSON*"])


def test_update_baselines_records_every_metric_in_the_device_keys_file(project: pytest.Pytester) -> None:
    result = run(project, "--update-baselines")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["rocm-validate baselines written: 2"])
    entries = stored(project)
    assert sorted(entries) == ["copy.device.2048mib", "gemm.bf16.8192x8192x8192"]
    gemm = entries["gemm.bf16.8192x8192x8192"]
    assert gemm["value"] == pytest.approx(2 * 8192**3 / 0.0015 / 1e12, rel=1e-3)
    assert (gemm["unit"], gemm["better"], gemm["samples"]) == ("TFLOP/s", "higher", 12)
    assert {"date", "torch", "runtime", "driver", "libraries", "git_commit"} <= set(gemm["provenance"])


def test_a_rerun_against_fresh_baselines_passes(project: pytest.Pytester) -> None:
    result = run(recorded(project))
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["gemm.bf16.8192x8192x8192 *733* TFLOP/s *733* 1.000 *56.1* pass"])


def test_a_slower_run_fails_with_value_baseline_ratio_band_noise_and_peak(project: pytest.Pytester) -> None:
    result = run(recorded(project), slowdown=1.25)
    result.assert_outcomes(failed=2)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*gemm.bf16.8192x8192x8192: regressed: 20.0% slower, 586.4 TFLOP/s vs baseline 733 (ratio 0.800, "
            "allowed 5.0% = max(min band 5.0%, 3 x noise 0.00%); catches a 5.0% change); 44.9% of the 1307 TFLOP/s datasheet peak*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_every_throughput_baseline_scaled_by_ten_percent_fails(project: pytest.Pytester) -> None:
    recorded(project)
    data = json.loads(baseline_file(project).read_text())
    for entry in data["metrics"].values():
        entry["value"] *= 1.10
    baseline_file(project).write_text(json.dumps(data))
    result = run(project)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*rocm-validate perf: 2 regressed*"])


def test_a_much_faster_run_passes_with_a_note_to_record_it(project: pytest.Pytester) -> None:
    result = run(recorded(project), slowdown=0.8)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*gemm.bf16.8192x8192x8192: 25.0% better than baseline*If this is the new normal*"])


@pytest.mark.parametrize(
    "content",
    ['{"schema": "rocm-validate/baselines/1", "metr', '{"schema": "rocm-validate/baselines/1", "device_key": "x"}'],
    ids=["truncated", "wrong-schema"],
)
def test_an_unusable_baseline_file_is_a_usage_error_naming_the_file_and_the_fix(
    project: pytest.Pytester, content: str
) -> None:
    baseline_file(project).write_text(content)
    result = run(project)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {baseline_file(project)}*git checkout -- *--update-baselines*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_update_baselines_never_writes_from_a_failed_test(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_failing="""
import pytest

@pytest.mark.rocm_suite("perf")
def test_measures_then_fails(perf, timed):
    perf.throughput("sdpa.forward.bert-large.48x16x512x64", timed(0.0002), 5.2e10, "TFLOP/s")
    assert False, "the output was wrong"
"""
    )
    result = run(project, "--update-baselines")
    result.assert_outcomes(passed=2, failed=1)
    assert "sdpa.forward.bert-large.48x16x512x64" not in stored(project)
    result.stdout.fnmatch_lines(
        [
            "*baseline not written: the test did not pass*",
            "rocm-validate baselines not recorded: 1",
            "  sdpa.forward.bert-large.48x16x512x64: new, *",
        ]
    )


def test_update_baselines_refuses_a_noisy_metric_and_says_so(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_noisy="""
import pytest

@pytest.mark.rocm_suite("perf")
def test_noisy(perf, timed):
    perf.throughput("gemm.fp16.8192x8192x8192", timed(0.0015, spread=0.3), 2 * 8192**3, "TFLOP/s")
"""
    )
    result = run(project, "--update-baselines")
    result.assert_outcomes(passed=3)
    assert "gemm.fp16.8192x8192x8192" not in stored(project)
    result.stdout.fnmatch_lines(
        [
            "*gemm.fp16.8192x8192x8192: not recorded: this run's round-to-round noise * exceeds 2.67%*rerun on an idle device",
            "rocm-validate baselines refused as too noisy: 1",
            "  gemm.fp16.8192x8192x8192: new, *",
        ]
    )


def test_rerecording_an_unchanged_stack_folds_the_run_into_each_entry(project: pytest.Pytester) -> None:
    recorded(project)
    result = run(project, "--update-baselines", slowdown=1.004)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["rocm-validate baselines folded into this stack's runs: 2"])
    assert [len(entry["runs"]) for entry in stored(project).values()] == [2, 2]


def test_update_baselines_refuses_a_regression_keeps_the_old_value_and_fails(project: pytest.Pytester) -> None:
    before = stored(recorded(project))
    result = run(project, "--update-baselines", slowdown=1.85)
    result.assert_outcomes(failed=2)
    assert result.ret == 1
    assert stored(project) == before
    result.stdout.fnmatch_lines(
        [
            "*gemm.bf16.8192x8192x8192: refused: * -> * TFLOP/s (-45.9%) is worse than the baseline beyond its band*"
            "--rocm-accept-regressions*",
            "rocm-validate baselines refused as regressions (--rocm-accept-regressions records them): 2",
            "  *: * -> * (-45.9%)",
        ]
    )


def test_accepted_regressions_are_written_and_listed_old_to_new(project: pytest.Pytester) -> None:
    before = stored(recorded(project))
    result = run(project, "--update-baselines", "--rocm-accept-regressions", slowdown=1.85)
    result.assert_outcomes(passed=2)
    gemm = "gemm.bf16.8192x8192x8192"
    assert stored(project)[gemm]["value"] == pytest.approx(before[gemm]["value"] / 1.85, rel=1e-3)
    result.stdout.fnmatch_lines(["rocm-validate baselines written: 2", f"  {gemm}: * -> * TFLOP/s (-45.9%)"])


def test_update_baselines_rewrites_only_the_metrics_it_measured(project: pytest.Pytester) -> None:
    before = stored(recorded(project))
    run(project, "--update-baselines", "--rocm-accept-regressions", "-k", "gemm", slowdown=1.2).assert_outcomes(
        passed=1
    )
    after = stored(project)
    assert after["copy.device.2048mib"] == before["copy.device.2048mib"]
    assert after["gemm.bf16.8192x8192x8192"]["value"] == pytest.approx(
        before["gemm.bf16.8192x8192x8192"]["value"] / 1.2, rel=1e-3
    )


def test_parallel_workers_recording_baselines_lose_no_entry(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_many="""
import pytest

@pytest.mark.rocm_suite("perf")
@pytest.mark.parametrize("index", range(16))
def test_one_metric_each(perf, timed, index):
    perf.throughput(f"copy.case{index}", timed(0.001 * (1 + index)), 1e9, "GB/s")
"""
    )
    result = project.runpytest_subprocess(
        "-n",
        "2",
        "--rocm-suite=perf",
        f"--rocm-baselines={project.path / 'baselines'}",
        "--update-baselines",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=18)
    assert len(stored(project)) == 18


def test_the_json_report_and_junit_xml_carry_each_verdict(project: pytest.Pytester) -> None:
    report, junit = project.path / "report.json", project.path / "junit.xml"
    run(recorded(project), f"--rocm-report={report}", f"--junitxml={junit}", slowdown=1.25).assert_outcomes(failed=2)
    metrics = {m["name"]: m for m in json.loads(report.read_text())["metrics"]}
    gemm = metrics["gemm.bf16.8192x8192x8192"]
    assert (gemm["verdict"], round(gemm["ratio"], 3), round(gemm["percent_of_peak"], 1)) == ("regressed", 0.8, 44.9)
    assert gemm["baseline"] == pytest.approx(733.0, rel=1e-3) and gemm["threshold"] == pytest.approx(0.95)
    properties = {p.get("name"): p.get("value") for p in ElementTree.parse(junit).iter("property")}
    assert properties["rocm_metric.copy.device.2048mib"].split("; ")[1] == "regressed"
    assert "x baseline" in properties["rocm_metric.copy.device.2048mib"]


def test_benchmark_json_is_written_for_dashboards(project: pytest.Pytester) -> None:
    path = project.path / "bench.json"
    run(recorded(project), f"--rocm-benchmark-json={path}").assert_outcomes(passed=2)
    document = json.loads(path.read_text())
    assert sorted(b["name"] for b in document["benchmarks"]) == ["copy.device.2048mib", "gemm.bf16.8192x8192x8192"]
    assert document["machine_info"]["gpu"]["device_key"] == KEY
    assert {"id", "dirty"} <= set(document["commit_info"])


def test_an_out_of_memory_error_fails_only_that_test_with_need_and_found(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_oom="""
import pytest
import torch

pytestmark = pytest.mark.rocm_suite("perf")

def test_too_big(perf):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has 1.2 GiB free")

def test_after_it(perf, timed):
    perf.throughput("copy.after.oom", timed(0.001), 1e9, "GB/s")
"""
    )
    result = run(project, "--update-baselines", "test_oom.py")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["*out of device memory in test_oom.py::test_too_big: needed 2.00 GiB more, found unknown free*"]
    )
    assert "raise torch.OutOfMemoryError" not in result.stdout.str()


def test_an_ini_rule_widens_the_band_of_the_metrics_it_names(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nrocm_perf_thresholds =\n    gemm.* floor=0.3 cap=0.5\n")
    result = run(recorded(project), slowdown=1.25)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*1 rocm_perf_thresholds rule(s) before the defaults*", "FAILED test_metrics.py::test_copy*"]
    )


@pytest.mark.parametrize(
    "args, ini, complaint",
    [
        (
            (),
            "[pytest]\nrocm_perf_thresholds = gemm.* floor=lots\n",
            "rocm_perf_thresholds (ini): line 1 'gemm.* floor=lots': floor='lots': expected a number",
        ),
        (
            ("--rocm-perf-window=0",),
            "",
            "--rocm-perf-window='0': expected a factor from 0.25 (shorter windows hold too few rounds to measure their noise) to 20",
        ),
    ],
    ids=["threshold-rule", "window"],
)
def test_a_bad_perf_option_is_a_usage_error_naming_it(
    project: pytest.Pytester, args: tuple[str, ...], ini: str, complaint: str
) -> None:
    if ini:
        project.makeini(ini)
    result = run(project, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {complaint}*"])


def test_an_informational_metric_is_shown_but_never_fails(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_compile="""
import os
import pytest

@pytest.mark.rocm_suite("perf")
def test_compile(perf):
    perf.record("train.bert-large.compile_seconds", 100.0 * float(os.environ["SLOWDOWN"]), "s", "lower")
"""
    )
    run(project, "--update-baselines", "test_compile.py").assert_outcomes(passed=1)
    result = run(project, "test_compile.py", slowdown=3.0)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*train.bert-large.compile_seconds *300* 3.000 * informational*"])


def test_two_tests_recording_one_metric_name_is_an_error(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_twice="""
import pytest

pytestmark = pytest.mark.rocm_suite("perf")

def test_first(perf, timed):
    perf.throughput("copy.same", timed(0.001), 1e9, "GB/s")

def test_second(perf, timed):
    perf.throughput("copy.same", timed(0.001), 1e9, "GB/s")
"""
    )
    result = run(project, "--update-baselines", "test_twice.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*metric copy.same is recorded twice (also by test_twice.py::test_first)*"])


def test_several_xdist_workers_on_one_gpu_are_warned_about() -> None:
    from rocm_validate.perf.plugin import shared_device_warning
    from rocm_validate.platform.devices import DeviceInfo

    gpu = DeviceInfo(backend="rocm", index=0, name="AMD Instinct MI300X", arch="gfx942", device_key=KEY)
    cpu = DeviceInfo(backend="cpu", index=None, name="cpu", arch="cpu", device_key="cpu-x")
    assert "4 xdist workers share cuda:0" in shared_device_warning(4, gpu)
    assert shared_device_warning(4, cpu) is None and shared_device_warning(None, gpu) is None


def test_the_summary_shows_the_clock_temperature_and_power_range_of_the_run() -> None:
    from rocm_validate.perf.plugin import telemetry_line
    from rocm_validate.results.metrics import Metric

    def measured(clock: float, watts: float, slowdowns: list[str]) -> Metric:
        after = {"clock_mhz": clock, "temperature_c": 60.0, "power_w": watts, "slowdowns": slowdowns}
        return Metric("m", 1.0, "x", extra={"telemetry": {"source": "nvidia-ml-py", "after": after}})

    line = telemetry_line([measured(1755, 690, []), measured(1410, 700, ["sw-power-cap"])])
    assert line == "telemetry (nvidia-ml-py): 1410-1755 MHz, 60-60 C, 690-700 W; limits seen: sw-power-cap"
    unavailable = Metric("m", 1.0, "x", extra={"telemetry": {"source": "none", "reason": "amdsmi is not installed"}})
    assert telemetry_line([unavailable]) == "telemetry: none (amdsmi is not installed)"


def test_pytest_help_imports_no_torch() -> None:
    code = "import sys, pytest; pytest.main(['--help']); sys.stderr.write(str('torch' in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert "--rocm-perf-window" in done.stdout
    assert done.stderr.strip().endswith("False")


def test_at_the_power_cap_a_run_slower_only_by_its_clock_passes_judged_per_clock(project, monkeypatch) -> None:
    monkeypatch.setenv("CLOCK_MHZ", "1600")
    monkeypatch.setenv("CAPPED", "0.9")
    recorded(project)
    monkeypatch.setenv("CLOCK_MHZ", str(1600 / 1.10))
    result = run(project, "--rocm-report=report.json", slowdown=1.10)
    result.assert_outcomes(passed=1, failed=1)  # the device copy is memory-bound: never judged per clock
    gemm = next(
        m for m in json.loads((project.path / "report.json").read_text())["metrics"] if m["name"].startswith("gemm")
    )
    assert (gemm["verdict"], gemm["extra"]["gate"]["basis"]) == ("pass", "per-clock")
    assert gemm["ratio"] == pytest.approx(1.0, rel=1e-3) and gemm["extra"]["gate"]["throughput_ratio"] == pytest.approx(
        1 / 1.10, rel=1e-3
    )
    result.stdout.fnmatch_lines(
        ["*copy.device.2048mib: regressed*", "*perf detects a slowdown*judged per clock cycle: 1*"]
    )


def test_at_the_power_cap_a_kernel_five_percent_slower_at_the_same_clock_fails(project, monkeypatch) -> None:
    monkeypatch.setenv("CLOCK_MHZ", "1600")
    monkeypatch.setenv("CAPPED", "0.9")
    result = run(recorded(project), slowdown=1.05)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*gemm.bf16.8192x8192x8192: regressed: 4.8% slower per clock cycle*judged per clock cycle*"]
    )


def test_the_table_and_the_report_state_the_change_each_metric_catches(project) -> None:
    result = run(recorded(project), "--rocm-report=report.json")
    result.stdout.fnmatch_lines(
        ["metric * ratio  detects  % peak  verdict", "gemm.bf16.8192x8192x8192 * 1.000 * 5.0% * pass"]
    )
    metrics = json.loads((project.path / "report.json").read_text())["metrics"]
    assert {m["name"]: m["detectable"] for m in metrics} == {
        "gemm.bf16.8192x8192x8192": 0.05,
        "copy.device.2048mib": 0.02,
    }


def test_three_recordings_fold_into_one_entry_whose_spread_sets_the_band(project) -> None:
    for slowdown in (1.0, 1.01, 0.99):
        run(project, "--update-baselines", slowdown=slowdown).assert_outcomes(passed=2)
    gemm = stored(project)["gemm.bf16.8192x8192x8192"]
    assert len(gemm["runs"]) == 3 and gemm["value"] == pytest.approx(2 * 8192**3 / 0.0015 / 1e12, rel=1e-3)
    result = run(project, "--rocm-report=report.json", slowdown=1.03)
    band = json.loads((project.path / "report.json").read_text())["metrics"][0]["extra"]["gate"]
    assert band["noise"] == pytest.approx(0.01 * (1 + 3.14159265 / 6) ** 0.5, rel=0.02)  # the runs' 1% spread
    result.assert_outcomes(passed=1, failed=1)  # gemm: band max(5% floor, 3 x 1.2%); copy: 2% floor


STALLED = """
import pytest

from rocm_validate.perf.recorder import Measurement
from rocm_validate.perf.stats import SampleSummary
from rocm_validate.perf.timing import Timing


@pytest.mark.rocm_suite("perf")
def test_stalled(perf):
    timing = Timing(SampleSummary((0.0015,) * 20, 1), "synthetic", 0.0, True, stalls=(0.0023,))
    perf.throughput("gemm.bf16.8192x8192x8192", Measurement(timing, {}), 2 * 8192**3, "TFLOP/s")
"""


def test_a_metric_with_stalled_rounds_left_out_says_so_in_the_report(project: pytest.Pytester) -> None:
    recorded(project)
    project.makepyfile(test_metrics=STALLED)
    report = project.path / "report.json"
    run(project, f"--rocm-report={report}").assert_outcomes(passed=1)
    (gemm,) = [m for m in json.loads(report.read_text())["metrics"] if m["name"] == "gemm.bf16.8192x8192x8192"]
    assert gemm["extra"]["timing"]["stalls"] == {"rounds": 1, "with_partner": 0, "of": 21, "worst_over_median": 1.533}
    assert "1 of 21 rounds stalled (worst 1.53x the median round) and were left out of the figure" in gemm["message"]
