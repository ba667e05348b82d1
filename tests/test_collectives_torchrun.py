"""Across nodes on torchrun: two torchrun "nodes" on this machine (one gloo rank each) meet through
torchrun's own c10d rendezvous and run the collectives entry point; rank 0 writes the report with
every rank's results, including the failures of a rank on the other node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from torchrun_nodes import two_nodes

from rocm_validate.collectives.busbw import EVERY_COLLECTIVE

QUICK = ("--sizes", "4KiB", "--iters", "2", "--rounds", "2", "--warmup", "0", "--p2p-size", "4KiB", "--timeout", "30")


def _two_nodes(tmp_path: Path, *extra: str) -> tuple[list[int], dict, str]:
    """The collectives under two torchrun agents (one process each); rank 0 writes the report."""
    report = tmp_path / "report.json"
    codes, output = two_nodes(tmp_path, ["rocm_validate.collectives", "--out", str(report), *QUICK, *extra], 180)
    assert report.exists(), output[-3000:]
    return codes, json.loads(report.read_text()), output


def test_two_torchrun_nodes_run_the_collectives_and_rank_0_writes_the_report(tmp_path: Path) -> None:
    codes, report, output = _two_nodes(tmp_path)
    assert codes == [0, 0], output[-3000:]
    assert report["passed"] and [r["rank"] for r in report["ranks"]] == [0, 1]
    assert {s["op"] for s in report["steps"]} == set(EVERY_COLLECTIVE)  # float32 and as training calls them
    assert all(s["world"] == 2 and s["busbw_gbps"] > 0 for s in report["steps"])
    assert "rocm-validate collectives: passed; wrote" in output


def test_a_wrong_result_on_the_other_node_is_gathered_into_rank_0s_report_and_fails_the_job(tmp_path: Path) -> None:
    codes, report, output = _two_nodes(tmp_path, "--fault", "all_reduce:1:corrupt")
    assert not report["passed"] and all(code != 0 for code in codes), codes  # every node fails the job alike
    step = next(s for s in report["steps"] if s["op"] == "all_reduce")
    assert len(step["mismatches"]) == 1 and step["mismatches"][0].startswith("rank 1 (")
    assert "elements differ" in step["mismatches"][0]
    assert "rocm-validate collectives: FAILED" in output


def test_a_bad_option_of_the_entry_point_is_a_usage_error_before_any_rendezvous() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "PATH": ""}
    done = subprocess.run(
        [sys.executable, "-m", "rocm_validate.collectives", "--sizes", "4 parsecs"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "rocm-validate collectives: '4 parsecs' is not a size; expected bytes or a number with KiB"
    )
