"""benchmarks/fleet_merge.py on a small fleet: it writes synthetic reports grown from a real CPU
report, merges them in its own process and checks the planted verdict (the 1,000-node run is the
benchmark's default; docs/node.md has its numbers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import fleet_reports as fr

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "fleet_merge.py"


def test_the_merge_benchmark_finds_the_planted_nodes_within_its_budget(tmp_path_factory, tmp_path):
    template = fr.real_reports(tmp_path_factory)[0]
    command = [sys.executable, str(SCRIPT), "--template", str(template), "--nodes", "80", "--tests", "60"]
    done = subprocess.run(
        [*command, "--metrics", "20", "--out", str(tmp_path / "merge.json")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "merge.json").read_text())
    assert (
        result["verdict"]
        == "rocm-validate fleet verdict: drain: node-0017 (below the fleet median); node-0042 (numerics)"
    )
    assert result["peak_rss_mib"] < result["budget"]["peak_rss_mib"] and result["wall_s"] < result["budget"]["wall_s"]


def test_the_merge_benchmark_fails_when_over_its_budget(tmp_path_factory):
    template = fr.real_reports(tmp_path_factory)[0]
    command = [
        sys.executable,
        str(SCRIPT),
        "--template",
        str(template),
        "--nodes",
        "70",
        "--tests",
        "20",
        "--metrics",
        "10",
    ]
    done = subprocess.run([*command, "--budget-mib", "1"], capture_output=True, text=True)
    assert done.returncode == 1 and "MiB budget" in done.stderr
