"""Whole-node runs end to end: --rocm-device=all on a node of fake GPUs, through real pytest-xdist
workers pinned one per GPU, their reports, the node-wide suites, crashes and peer comparison."""

from __future__ import annotations

import json

import fake_node
import pytest

NODE_ARGS = ("--rocm-device=all", "-p", "no:cacheprovider")


_node = fake_node.write_node


PINNED = """
import os

def test_sees_only_its_own_gpu(rocm_device, rocm_devices, record_rocm_metric):
    assert rocm_device.index == 0 and [d.index for d in rocm_devices if d.is_gpu] == [0]
    assert os.environ["HIP_VISIBLE_DEVICES"] == os.environ["ROCM_VALIDATE_NODE_GPU"]
    record_rocm_metric("pinned.gpu", 1.0, "GPU", extra={"bus": int(rocm_device.pci_bus_id.split(":")[1], 16)})
"""


def test_every_gpu_runs_every_test_in_a_worker_pinned_to_it(pytester: pytest.Pytester) -> None:
    _node(pytester, 3, correctness__pinned=PINNED)
    result = pytester.runpytest_subprocess("--rocm-suite=correctness", "--rocm-report=report.json", *NODE_ARGS)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "rocm-validate node: 3 GPUs, one pinned pytest-xdist worker each (--dist each)",
            "rocm-validate node: GPU 0 (BDF 0000:01:00.0, UUID GPU-0000): AMD Instinct MI300X; HIP_VISIBLE_DEVICES=0",
            "rocm-validate node: GPU 2 (BDF 0000:03:00.0, UUID GPU-0002): AMD Instinct MI300X; HIP_VISIBLE_DEVICES=2",
            "*rocm-validate node*",
            "GPU  BDF * UUID * name * passed  failed  skipped  below peers",
            "2    0000:03:00.0  GPU-0002  AMD Instinct MI300X  1 * 0 * 0 * 0",
        ]
    )
    report = json.loads((pytester.path / "report.json").read_text())
    assert sorted(t["gpu"]["index"] for t in report["tests"]) == [0, 1, 2]
    assert {(m["gpu"]["index"], m["extra"]["bus"]) for m in report["metrics"]} == {(0, 1), (1, 2), (2, 3)}
    assert [g["summary"] for g in report["node"]["gpus"]] == [{"passed": 1}] * 3
    assert report["node"]["gpus"][1]["pinning"] == "HIP_VISIBLE_DEVICES=1"


ORDERED = """
import os, time
from pathlib import Path

LOG = Path(__file__).parents[2] / "order.log"

def test_{name}():
    with LOG.open("a") as log:
        log.write(f"{{os.environ.get('ROCM_VALIDATE_NODE_GPU')}} {name} start\\n")
    time.sleep({sleep})
    with LOG.open("a") as log:
        log.write(f"{{os.environ.get('ROCM_VALIDATE_NODE_GPU')}} {name} end\\n")
"""


def test_node_wide_tests_run_once_on_the_first_gpu_after_every_gpus_own_tests(pytester: pytest.Pytester) -> None:
    _node(
        pytester,
        2,
        correctness__a=ORDERED.format(name="gemm", sleep=0.5),
        correctness__b=ORDERED.format(name="sdpa", sleep=0.5),
        collectives__c=ORDERED.format(name="group", sleep=0),
    )
    result = pytester.runpytest_subprocess(
        "--rocm-suite=correctness,collectives", "--rocm-report=report.json", *NODE_ARGS
    )
    result.assert_outcomes(passed=5)
    lines = (pytester.path / "order.log").read_text().splitlines()
    assert [line for line in lines if "group" in line] == ["0 group start", "0 group end"]
    assert lines[-2:] == ["0 group start", "0 group end"], lines
    report = json.loads((pytester.path / "report.json").read_text())
    assert [t["gpu"] for t in report["tests"] if "group" in t["nodeid"]] == [None]
    result.stdout.fnmatch_lines(["*; collectives once, after them, on GPU 0's worker"])


CRASHING = """
import os

def test_a_crash():
    if os.environ["ROCM_VALIDATE_NODE_GPU"] == "1":
        os.abort()

def test_b_after():
    pass
"""


def test_a_crashed_worker_loses_only_its_gpus_test_and_the_report_names_the_gpu(pytester: pytest.Pytester) -> None:
    _node(pytester, 2, correctness__crash=CRASHING)
    result = pytester.runpytest_subprocess("--rocm-suite=correctness", "--rocm-report=report.json", *NODE_ARGS)
    result.assert_outcomes(passed=3, failed=1)
    report = json.loads((pytester.path / "report.json").read_text())
    outcomes = {(t["nodeid"].split("::")[1], t["gpu"]["index"]): t["outcome"] for t in report["tests"]}
    assert outcomes == {
        ("test_a_crash", 0): "passed",
        ("test_a_crash", 1): "failed",  # as pytest counts it (failed=1 above)
        ("test_b_after", 0): "passed",
        ("test_b_after", 1): "passed",
    }
    crashed = next(t for t in report["tests"] if t["outcome"] == "failed")
    assert crashed["message"].startswith("GPU 1 (BDF 0000:02:00.0): ")
    assert "worker 'gw1' crashed while running 'suites/correctness/test_crash.py::test_a_crash'" in crashed["message"]
    assert report["node"]["gpus"][1]["summary"] == {"failed": 1, "passed": 1}


HANGING = """
import os
import signal
import time

def test_a_hang():
    if os.environ["ROCM_VALIDATE_NODE_GPU"] == "1":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # as a thread blocked in C: no handler runs
        time.sleep(10_000)

def test_b_after():
    pass
"""


def test_a_hung_gpu_is_reported_as_a_hang_naming_the_gpu_and_its_bdf(pytester: pytest.Pytester) -> None:
    _node(pytester, 2, correctness__hang=HANGING)
    result = pytester.runpytest_subprocess(
        "--rocm-suite=correctness", "--rocm-timeout=1", "--rocm-report=report.json", *NODE_ARGS, timeout=120
    )
    assert result.ret == 1
    assert result.parseoutcomes()["failed"] == 1  # the hang, once: xdist's report of the ended worker is folded in
    report = json.loads((pytester.path / "report.json").read_text())
    hung = [t for t in report["tests"] if t["category"] == "hang"]
    assert [(t["nodeid"].split("::")[1], t["gpu"]["index"]) for t in hung] == [("test_a_hang", 1)]
    assert "(cuda:0, BDF 0000:02:00.0) is stuck in native code 10 s past its 1 s timeout" in hung[0]["message"]
    assert (
        "hang: suites/correctness/test_hang.py::test_a_hang never returned on GPU 1 (BDF 0000:02:00.0)"
        in (report["verdict"])
    )


SLOW_GPU = """
import os

def test_gemm(record_rocm_metric):
    slow = os.environ["ROCM_VALIDATE_NODE_GPU"] == "{slow}"
    record_rocm_metric("gemm.bf16.8192x8192x8192", 600.0 if slow else 680.0, "TFLOP/s", dispersion=0.01)
"""


def test_a_gpu_slower_than_its_peers_fails_the_run_naming_it_with_no_baseline(pytester: pytest.Pytester) -> None:
    _node(pytester, 3, perf__gemm=SLOW_GPU.format(slow=2))
    result = pytester.runpytest_subprocess(
        "--rocm-suite=perf", "--rocm-report=report.json", "--rocm-summary=summary.md", *NODE_ARGS
    )
    assert result.ret == 1
    result.assert_outcomes(passed=3)
    message = (
        "GPU 2 (BDF 0000:03:00.0) is 11.8% below the median of its 2 peers on gemm.bf16.8192x8192x8192: "
        "600 vs 680 TFLOP/s (allowed 5.0% = max(min band 5.0%, 3 x noise 1.05%))"
    )
    result.stdout.fnmatch_lines([message])
    report = json.loads((pytester.path / "report.json").read_text())
    assert [(p["gpu"]["index"], p["verdict"]) for p in report["peers"]] == [
        (0, "pass"),
        (1, "pass"),
        (2, "below-peers"),
    ]
    assert report["exit_status"] == 1
    verdict = "GPU 2 (BDF 0000:03:00.0) slower than its peers by 11.8% on 1 metric: drain and triage"
    assert report["verdict"].startswith(f"rocm-validate verdict: {verdict}; every other check that ran passed")
    summary = (pytester.path / "summary.md").read_text()
    assert (
        f"- {message}" in summary
        and "| gemm.bf16.8192x8192x8192 | 2 | 600 | TFLOP/s | - | 0.882 | recorded / below peers |" in summary
    )


def test_a_node_of_equal_gpus_passes_the_peer_comparison(pytester: pytest.Pytester) -> None:
    _node(pytester, 2, perf__gemm=SLOW_GPU.format(slow="none"))
    result = pytester.runpytest_subprocess("--rocm-suite=perf", *NODE_ARGS)
    assert result.ret == 0, result.stdout.str()[-2000:]


def test_a_listed_gpu_that_does_not_exist_is_exit_4_naming_it(pytester: pytest.Pytester) -> None:
    _node(pytester, 2, correctness__pinned=PINNED)
    result = pytester.runpytest_subprocess("--rocm-suite=correctness", "--rocm-device=0,9", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rocm-device=0,9: no GPU 9; found 2: 0 (AMD Instinct MI300X), 1 (AMD Instinct MI300X)*"]
    )


def test_a_worker_count_that_does_not_match_the_gpus_is_exit_4(pytester: pytest.Pytester) -> None:
    _node(pytester, 2, correctness__pinned=PINNED)
    result = pytester.runpytest_subprocess("--rocm-suite=correctness", "-n", "3", *NODE_ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rocm-device=all runs one pytest-xdist worker per device (2 here), but -n 3 was given*"]
    )


def test_a_whole_node_run_without_pytest_xdist_says_how_to_install_it(pytester: pytest.Pytester) -> None:
    _node(pytester, 2, correctness__pinned=PINNED)
    result = pytester.runpytest_subprocess("--rocm-suite=correctness", "-p", "no:xdist", *NODE_ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rocm-device=all runs one pytest-xdist worker per GPU; install it: pip install pytest-xdist*"]
    )


def test_all_on_a_machine_with_no_gpu_validates_the_cpu_once_and_says_so(pytester: pytest.Pytester) -> None:
    """Real discovery (in a child process, as the controller of a node run does) on this CPU-only machine."""
    pytester.makepyfile(
        **{"suites/correctness/test_cpu.py": "def test_cpu(rocm_device):\n    assert not rocm_device.is_gpu\n"}
    )
    result = pytester.runpytest_subprocess("--rocm-suite=correctness", *NODE_ARGS)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "rocm-validate node: --rocm-device=all found no GPU; validating the CPU once",
            "no GPU in this node run: the CPU was validated once",
        ]
    )


def test_the_header_names_each_gpus_pinning_inside_the_lists_already_in_force(
    pytester: pytest.Pytester, monkeypatch
) -> None:
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "4,6")
    _node(pytester, 8, correctness__pinned=PINNED)
    result = pytester.runpytest("--rocm-suite=correctness", "--co", *NODE_ARGS)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "rocm-validate node: 2 GPUs, not distributed (collect-only, or node-wide suites only)",
            "rocm-validate node: GPU 1 (BDF 0000:07:00.0, UUID GPU-0006): AMD Instinct MI300X; HIP_VISIBLE_DEVICES=6 "
            "(entries of HIP_VISIBLE_DEVICES=4,6; inside ROCR_VISIBLE_DEVICES=0,1,2,3,4,5,6,7)",
        ]
    )
    assert "rocm-validate node ===" not in result.stdout.str()  # nothing ran: no node table
