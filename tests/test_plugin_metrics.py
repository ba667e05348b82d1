"""Recorded metrics reach the terminal table, JUnit XML and the JSON report, also from xdist workers."""

import json
import os
import stat
import xml.etree.ElementTree as ET

import fake_devices

from rocm_validate.results import jsonfile
from rocm_validate.results.report import REPORT_SCHEMA

TWO_METRICS = """
def test_gemm(record_rocm_metric):
    record_rocm_metric("gemm_bf16", 731.25, "TFLOP/s", peak=989.4, work=1.1e12, work_unit="FLOP")

def test_latency(record_rocm_metric):
    record_rocm_metric("launch_latency", 4.5, "us", better="lower")
"""


def test_metrics_are_listed_in_the_terminal_table(pytester):
    pytester.makepyfile(TWO_METRICS)
    result = pytester.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*= rocm-validate metrics =*",
            "metric * value * unit * baseline * ratio * % peak * verdict",
            "gemm_bf16 * 731.2 * TFLOP/s * - * - * 73.9 * recorded",
            "launch_latency * 4.5 * us * - * - * - * recorded",
        ]
    )


def test_each_metric_is_a_readable_junit_property(pytester):
    pytester.makepyfile(TWO_METRICS)
    pytester.runpytest("--junitxml=junit.xml").assert_outcomes(passed=2)
    tree = ET.parse(pytester.path / "junit.xml")
    properties = {p.get("name"): p.get("value") for p in tree.iter("property")}
    assert properties["rocm_metric.gemm_bf16"] == "731.2 TFLOP/s; recorded; 73.9% of peak"
    assert properties["rocm_metric.launch_latency"] == "4.5 us; recorded"


def test_junit_xml_from_xdist_workers_is_as_readable(pytester):
    pytester.makepyfile(TWO_METRICS)
    pytester.runpytest("-n", "2", "--junitxml=junit.xml").assert_outcomes(passed=2)
    properties = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "junit.xml").iter("property")}
    assert properties["rocm_metric.gemm_bf16"] == "731.2 TFLOP/s; recorded; 73.9% of peak"


def test_the_json_report_holds_device_environment_tests_and_metrics(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()))
    pytester.makepyfile(TWO_METRICS + "\ndef test_broken():\n    assert 1 == 2\n")
    result = pytester.runpytest("--rocm-suite=correctness", "--rocm-report=out/report.json")
    assert result.ret == 1
    report = jsonfile.read_json(pytester.path / "out" / "report.json", REPORT_SCHEMA, fix="")
    assert report["device"]["device_key"] == "nvidia-h100-80gb-hbm3-sm90"
    assert report["environment"]["packages"]["torch"]
    assert report["summary"] == {"passed": 2, "failed": 1}
    assert [m["name"] for m in report["metrics"]] == ["gemm_bf16", "launch_latency"]
    broken = next(t for t in report["tests"] if t["nodeid"].endswith("test_broken"))
    assert broken["outcome"] == "failed" and "assert 1 == 2" in broken["message"]
    assert report["exit_status"] == 1


def test_a_nan_measurement_fails_its_test_and_is_reported_as_invalid(pytester):
    pytester.makepyfile("def test_nan(record_rocm_metric):\n    record_rocm_metric('bw', float('nan'), 'GB/s')\n")
    result = pytester.runpytest("--rocm-report=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*metric bw is nan: the measurement produced no finite number*"])
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["metrics"][0]["verdict"] == "invalid" and report["metrics"][0]["value"] is None


def test_a_metric_with_a_wrong_direction_is_an_error_naming_it(pytester):
    pytester.makepyfile("def test_x(record_rocm_metric):\n    record_rocm_metric('bw', 1.0, 'GB/s', better='up')\n")
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*metric 'bw': better must be 'higher' or 'lower', found 'up'*"])


def test_metrics_from_xdist_workers_reach_the_table_and_the_report(pytester):
    pytester.makepyfile(TWO_METRICS)
    result = pytester.runpytest_subprocess("-n", "2", "--rocm-report=report.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["gemm_bf16 * 731.2 *"])
    result.stdout.fnmatch_lines(["launch_latency * 4.5 *"])
    report = json.loads((pytester.path / "report.json").read_text())
    assert sorted(m["name"] for m in report["metrics"]) == ["gemm_bf16", "launch_latency"]
    assert "rocm_metric.launch_latency" in (pytester.path / "junit.xml").read_text()


def test_a_finalize_hook_can_replace_a_metric_after_the_call(pytester):
    pytester.makeconftest(
        "def pytest_rocm_metric_finalize(item, report, metric):\n"
        "    return metric.with_verdict('updated' if report.passed else 'kept', 'seen by hook')\n"
    )
    pytester.makepyfile(TWO_METRICS)
    result = pytester.runpytest("--rocm-report=report.json")
    result.assert_outcomes(passed=2)
    report = json.loads((pytester.path / "report.json").read_text())
    assert {m["verdict"] for m in report["metrics"]} == {"updated"}
    result.stdout.fnmatch_lines(["gemm_bf16: seen by hook"])


def test_a_run_without_metrics_prints_no_table(pytester):
    pytester.makepyfile("def test_ok():\n    pass\n")
    assert "rocm-validate metrics" not in pytester.runpytest().stdout.str()


def test_an_out_of_memory_error_fails_only_its_test_and_says_what_to_do(pytester):
    pytester.makepyfile(
        "import torch\n\n"
        "def test_huge():\n"
        "    raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 900.00 GiB')\n\n"
        "def test_after():\n"
        "    assert torch.ones(2).sum() == 2\n"
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*out of device memory in test_*::test_huge: needed 900.00 GiB more*"])
    assert "raise torch.OutOfMemoryError" not in result.stdout.str()


def test_reports_are_written_with_the_usual_file_mode(pytester):
    pytester.makepyfile("def test_ok():\n    pass\n")
    pytester.runpytest("--rocm-report=report.json").assert_outcomes(passed=1)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((pytester.path / "report.json").stat().st_mode) == 0o666 & ~umask


def test_the_run_says_where_it_wrote_the_report(pytester):
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest("--rocm-report=out/report.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"rocm-validate report: wrote {pytester.path / 'out' / 'report.json'}"])


def test_the_header_has_no_pytest_benchmark_banner(pytester):
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert not [line for line in result.stdout.lines if line.startswith("benchmark: ")]


def test_junit_xml_names_the_device_and_torch_for_the_whole_suite(pytester):
    pytester.makeconftest(fake_devices.discovery_conftest(fake_devices.h100()))
    pytester.makepyfile(TWO_METRICS)
    pytester.runpytest("--rocm-suite=correctness", "--junitxml=junit.xml").assert_outcomes(passed=2)
    suite = ET.parse(pytester.path / "junit.xml").find("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["rocm_validate.device_key"] == "nvidia-h100-80gb-hbm3-sm90"
    assert properties["rocm_validate.torch"] == fake_devices.h100().torch_version


def test_a_verdict_is_its_word_in_json_and_messages():
    from rocm_validate.results.metrics import Metric, Verdict

    metric = Metric("gemm.bf16.8192x8192x8192", 700.0, "TFLOP/s").with_verdict(Verdict.REGRESSED)
    assert json.loads(metric.to_property()[1])["verdict"] == "regressed"
    assert f"{metric.verdict}" == str(metric.verdict) == "regressed" and metric.verdict == "regressed"
    assert Metric.from_dict(metric.to_dict()).verdict is Verdict.REGRESSED


def test_a_verdict_that_is_no_verdict_is_refused():
    import pytest

    from rocm_validate.results.metrics import Metric

    with pytest.raises(ValueError, match="'regresed' is not a valid Verdict"):
        Metric("gemm.bf16.8192x8192x8192", 700.0, "TFLOP/s", verdict="regresed")


def test_the_gates_record_is_written_under_extra_gate_with_the_reports_keys():
    from rocm_validate.results.metrics import GateRecord, Metric, Verdict

    floor = {"sku_floor": 552.0, "sku_floor_source": "datasheet x0.75", "sku_floor_verdict": Verdict.FLOOR_PASS}
    record = GateRecord(0.03, 3.0, 0.08, gated_by="floor", **floor)
    metric = Metric("gemm.bf16.8192x8192x8192", 700.0, "TFLOP/s", extra={"timing": {}}, gate=record)
    assert metric.to_dict()["extra"] == {
        "timing": {},
        "gate": {
            "floor": 0.03,
            "k": 3.0,
            "cap": 0.08,
            "floor_value": 552.0,
            "floor_source": "datasheet x0.75",
            "floor_verdict": "floor-pass",
            "allowed": None,
            "noise": None,
            "basis": "throughput",
            "detectable": None,
            "gated_by": "floor",
        },
    }
    assert "gate" not in metric.to_dict()


def test_a_metric_read_back_from_its_property_carries_the_same_gate_record():
    from rocm_validate.results.metrics import GateRecord, Metric, metrics_from_properties

    record = GateRecord(0.03, 3.0, 0.08, informational="host-side", gated_by="baseline", accepted_regression=True)
    metric = Metric("launch.empty_kernel.host_us", 4.0, "us", better="lower", gate=record)
    (read,) = metrics_from_properties([metric.to_property()])
    assert read == metric and read.gate == record and read.extra == {}


def test_a_metric_the_gate_never_judged_writes_only_its_band():
    from rocm_validate.results.metrics import GateRecord, Metric, Verdict

    metric = Metric(
        "gemm.bf16.8192x8192x8192", 0.0, "TFLOP/s", verdict=Verdict.INVALID, gate=GateRecord(0.03, 3.0, 0.08)
    )
    assert metric.to_dict()["extra"] == {"gate": {"floor": 0.03, "k": 3.0, "cap": 0.08}}
