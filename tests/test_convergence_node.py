"""The mini-BERT on a whole node, on the CPU: two fake GPUs whose pinned workers train on the CPU
(the seam: `torch_device` overridden in the node's conftest, so each worker trains the CPU preset).
The seeds are spread over the GPUs' beside lanes, the verdict pools them, and it is the verdict a
one-device run of the same seeds gives; a GPU whose runs converge later than its peer's is named."""

from __future__ import annotations

import json
from pathlib import Path

import fake_node
import pytest

SUITE = Path(__file__).resolve().parents[1] / "suites" / "convergence"
SEEDS = "--rocm-convergence-seeds=4"
ON_THE_CPU = """

@pytest.fixture(scope="session")
def torch_device():
    import torch

    return torch.device("cpu")
"""
GPU_1_TRAINS_BADLY = """

@pytest.fixture(autouse=True, scope="session")
def _gpu_1_trains_at_a_twentieth_of_the_learning_rate():
    if os.environ.get("ROCM_VALIDATE_NODE_GPU") == "1":
        from rocm_validate.convergence import check

        real = check.MiniBertCheck._trainer
        check.MiniBertCheck._trainer = lambda self, c: real(self, dataclasses.replace(c, lr_scale=0.05))
    yield
"""


@pytest.fixture
def node(pytester: pytest.Pytester) -> pytest.Pytester:
    """The real convergence suite on a node of two fake GPUs that train on the CPU."""
    fake_node.write_node(pytester, 2)
    conftest = pytester.path / "conftest.py"
    conftest.write_text("import pytest\n" + conftest.read_text() + ON_THE_CPU)
    target = pytester.path / "suites" / "convergence"
    target.mkdir(parents=True)
    for source in SUITE.glob("test_*.py"):
        (target / source.name).write_text(source.read_text())
    return pytester


def _run(pytester: pytest.Pytester, device: str, report: str) -> tuple[pytest.RunResult, dict]:
    result = pytester.runpytest_subprocess(
        "--rocm-suite=convergence",
        f"--rocm-device={device}",
        SEEDS,
        "-k",
        "not (autocast or fused or compile or fp8 or records or mlperf)",
        f"--rocm-report={report}",
        "-p",
        "no:cacheprovider",
    )
    return result, json.loads((pytester.path / report).read_text())


def _verdict(report: dict) -> dict:
    judged = next(t for t in report["tests"] if "converges_like_the_reference[reference]" in t["nodeid"])
    (metric,) = judged["metrics"]
    return {
        "outcome": judged["outcome"],
        "verdict": metric["verdict"],
        "olympic_mean": metric["value"],
        "samples_per_seed": metric["extra"]["samples_per_seed"],
    }


def test_the_gpus_share_the_seeds_and_the_pooled_verdict_is_a_one_device_runs(node: pytest.Pytester) -> None:
    spread, shared = _run(node, "all", "node.json")
    assert spread.ret == 0, spread.stdout.str()[-3000:]
    alone, single = _run(node, "cpu", "single.json")
    assert alone.ret == 0, alone.stdout.str()[-3000:]
    assert _verdict(shared) == _verdict(single)
    assert _verdict(shared)["verdict"] == "pass" and len(_verdict(shared)["samples_per_seed"]) == 4
    shares = {t["gpu"]["index"]: t["work"] for t in shared["tests"] if "trains_its_share" in t["nodeid"] and t["gpu"]}
    assert shares == {0: "shared", 1: "shared"}
    judged = next(t for t in shared["tests"] if "converges_like_the_reference[reference]" in t["nodeid"])
    assert judged["gpu"] is None and judged["work"] == "node-wide"
    assert (
        "seeds by GPU: GPU 0 (BDF 0000:01:00.0): 0, 2; GPU 1 (BDF 0000:02:00.0): 1, 3"
        in judged["metrics"][0]["message"]
    )
    per_gpu = sorted(m["gpu"]["index"] for m in shared["metrics"] if m["name"] == "mini_bert.runs.samples_to_converge")
    assert per_gpu == [0, 1] and not [p for p in shared["peers"] if p["verdict"] != "pass"]


def test_a_gpu_whose_runs_converge_later_than_its_peers_is_named(node: pytest.Pytester) -> None:
    conftest = node.path / "conftest.py"
    conftest.write_text("import dataclasses, os\n" + conftest.read_text() + GPU_1_TRAINS_BADLY)
    result, report = _run(node, "all", "node.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "GPU 1 (BDF 0000:02:00.0) is *% above the median of its peer on mini_bert.runs.samples_to_converge "
            "(lower is better): * vs * samples (allowed *% = 3.5 x the RCPs' run-to-run spread over both sides' runs*"
        ]
    )
    assert [p["gpu"]["index"] for p in report["peers"] if p["verdict"] == "below-peers"] == [1]
    judged = next(t for t in report["tests"] if "converges_like_the_reference[reference]" in t["nodeid"])
    assert judged["outcome"] == "failed"
    assert "the runs that missed the target were all trained on GPU 1 (BDF 0000:02:00.0)" in judged["message"]
