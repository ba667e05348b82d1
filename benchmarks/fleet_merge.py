"""Merging a thousand node reports: how long `rocm-validate fleet` takes and how much memory.

    python benchmarks/fleet_merge.py --template cpu.json [--nodes 1000] [--dir DIR] [--out FILE]

The template is a real report: `pytest --rocm-device=cpu --rocm-suite=correctness,perf
--rocm-report=cpu.json` (a few `-k` tests are enough). It is grown to the size of a whole-node
report (`--tests`, `--metrics`: the 2 x H100 whole-node run passed 565 checks and recorded about a
hundred metrics), described as an H100 node (so every metric is compared across the fleet, the
costly path), and written `--nodes` times with each node's figures moved by up to 0.5%, two nodes
10% slower on GEMMs, two failing a check and one report truncated. Then `rocm-validate fleet DIR`
runs in its own process, timed, its peak resident memory read from the kernel (ru_maxrss).

Writes the measurement to --out (JSON) and exits 1 when the merge exceeds --budget-s or
--budget-mib, or its verdict is not the planted one.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rocm_validate.results import jsonfile

REPO = Path(__file__).resolve().parents[1]
# The lent H100 as `rocm-validate devices --json` described it.
H100 = json.loads((REPO / "docs" / "measurements" / "h100-devices.json").read_text())["devices"][0]
SLOW, FAILING, CORRUPT = (17, 503), (42, 777), 999
SCHEMA: dict[str, Any] = {
    "title": "fleet merge benchmark",
    "type": "object",
    "required": ["nodes", "wall_s", "peak_rss_mib"],
}


def grown(template: dict[str, Any], tests: int, metrics: int) -> dict[str, Any]:
    """The template with its tests and metrics repeated (renamed) up to `tests` and `metrics`, as
    an H100 node's report."""
    report = copy.deepcopy(template)
    report["device"] = dict(H100)
    ran = [t for t in template["tests"] if t["outcome"] != "skipped"] or template["tests"]
    measured = [m for m in template["metrics"]]
    report["tests"] = [
        {**copy.deepcopy(ran[i % len(ran)]), "nodeid": f"{ran[i % len(ran)]['nodeid']}[copy-{i}]", "metrics": []}
        for i in range(tests)
    ]
    report["metrics"] = [{**copy.deepcopy(measured[i % len(measured)])} for i in range(metrics)]
    for index, metric in enumerate(report["metrics"]):
        metric["name"] = f"{metric['name']}.k{index // len(measured)}" if index >= len(measured) else metric["name"]
        metric["extra"].pop("telemetry", None)  # a quiet node: no other work beside its measurements
    report["tests"][0]["metrics"] = report["metrics"]  # the tests carry the metrics too, as real reports do
    return report


def write_fleet(template: dict[str, Any], folder: Path, nodes: int, seed: int = 0) -> str:
    """`nodes` reports in `folder`; the check the failing nodes fail."""
    rng = random.Random(seed)
    check = template["tests"][0]["nodeid"]
    values = [m["value"] for m in template["metrics"]]
    for index in range(nodes):
        host = f"node-{index:04d}"
        template["environment"]["host"] = host
        for metric, value in zip(template["metrics"], values):
            slow = 0.9 if index in SLOW and metric["name"].startswith("gemm.") else 1.0
            metric["value"] = value * slow * (1 + rng.uniform(-0.005, 0.005))
        template["tests"][0]["outcome"] = "failed" if index in FAILING else "passed"
        template["tests"][0]["category"] = "numerics" if index in FAILING else None
        text = json.dumps(template)
        (folder / f"{host}.json").write_text(text[: len(text) // 2] if index == CORRUPT else text)
    return check


def merge(folder: Path, out: Path) -> dict[str, Any]:
    """Wall and CPU seconds, peak resident MiB, exit status and verdict of `rocm-validate fleet folder`
    (its reading processes included: they are its children, waited for)."""
    command = [sys.executable, "-m", "rocm_validate.cli.main", "fleet", str(folder), "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    verdict = next((line for line in done.stdout.splitlines() if line.startswith("rocm-validate fleet verdict:")), "")
    if not verdict:
        print(done.stdout, done.stderr, file=sys.stderr)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
        "peak_rss_mib": round(after.ru_maxrss / 1024, 1),  # the largest process waited for: the merge or a reader
        "exit_status": done.returncode,
        "verdict": verdict,
    }


def expected_verdict(nodes: int) -> str:
    """The verdict the planted faults must give: the nodes to drain, grouped by why."""
    why = {
        **dict.fromkeys(SLOW, "below the fleet median"),
        **dict.fromkeys(FAILING, "numerics"),
        CORRUPT: "no usable report",
    }
    groups: dict[str, list[str]] = {}
    for index in sorted(i for i in why if i < nodes):
        groups.setdefault(why[index], []).append(f"node-{index:04d}")
    drain = "; ".join(f"{', '.join(hosts)} ({label})" for label, hosts in groups.items())
    return f"rocm-validate fleet verdict: drain: {drain}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--template", type=Path, required=True, help="a real node report (pytest --rocm-report)")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--tests", type=int, default=565, help="checks per report (default: a 2 x H100 whole-node run)")
    parser.add_argument("--metrics", type=int, default=110, help="metrics per report")
    parser.add_argument("--dir", type=Path, help="where the reports go (default: a temporary folder, removed)")
    parser.add_argument("--out", type=Path, help="write the measurement here (JSON)")
    parser.add_argument("--budget-s", type=float, default=60.0, help="the most the merge may take (default 60 s)")
    parser.add_argument("--budget-mib", type=float, default=512.0, help="the most memory it may use (default 512 MiB)")
    args = parser.parse_args(argv)

    template = grown(json.loads(args.template.read_text()), args.tests, args.metrics)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="fleet-merge-"))
    reports = folder / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    write_fleet(template, reports, args.nodes)
    print(
        f"wrote {args.nodes} reports of {len(json.dumps(template)) / 1024**2:.2f} MiB in {time.perf_counter() - started:.0f} s"
    )
    merged = merge(reports, folder / "fleet")
    markdown = (folder / "fleet" / "fleet.md").read_text() if (folder / "fleet" / "fleet.md").exists() else ""
    result = {
        "nodes": args.nodes,
        "tests_per_report": args.tests,
        "metrics_per_report": args.metrics,
        "report_mib": round(len(json.dumps(template)) / 1024**2, 3),
        **merged,
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "budget": {"wall_s": args.budget_s, "peak_rss_mib": args.budget_mib},
        "markdown_lines": len(markdown.splitlines()),
    }
    wall, peak, verdict = merged["wall_s"], merged["peak_rss_mib"], merged["verdict"]
    print(json.dumps(result, indent=2))
    if args.out:
        jsonfile.write_json(args.out, result, SCHEMA)
    if args.dir is None:
        shutil.rmtree(folder, ignore_errors=True)
    wanted = expected_verdict(args.nodes)
    problems = [
        *([f"took {wall:.1f} s, over the {args.budget_s:g} s budget"] if wall > args.budget_s else []),
        *([f"used {peak:.0f} MiB, over the {args.budget_mib:g} MiB budget"] if peak > args.budget_mib else []),
        *([f"verdict {verdict!r}, expected {wanted!r}"] if verdict != wanted else []),
    ]
    for problem in problems:
        print(f"fleet_merge: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
