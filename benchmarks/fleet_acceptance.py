"""The fleet on one 2-GPU machine: each GPU as a node, merged; one of them contended; the
interconnect gated by floors with no baselines. For a lent 2-GPU machine, in three calls:

    python benchmarks/fleet_acceptance.py --dir DIR --step nodes [-- PYTEST ARGS]
    python benchmarks/fleet_acceptance.py --dir DIR --step contention
    python benchmarks/fleet_acceptance.py --dir DIR --step floors

* nodes: GPU 0 and GPU 1 run the suites side by side, each pinned to its GPU (CUDA_VISIBLE_DEVICES
  and HIP_VISIBLE_DEVICES) and named as a launcher names a node (ROCM_VALIDATE_HOST=gpu0, gpu1),
  each writing its own report; then `rocm-validate fleet` merges them. Default pytest arguments:
  --rocm-suite=correctness,perf -k "not compiled and not torchao".
* contention: the same for the bf16 GEMMs and the copies, while a second process runs a bf16 GEMM
  loop on GPU 1 only; the fleet must name gpu1 (to rerun on an idle node) and not gpu0.
* floors: `pytest --rocm-device=all --rocm-suite=collectives` against an empty baselines folder;
  every collective at a gated size (256 MiB and up) and every P2P copy must be gated by a floor.

With --cpu the same steps run on the CPU as two "nodes" (--rocm-device=cpu), where there is no GPU
to contend for and no floor to gate by: those checks are skipped, saying so. Each step writes
DIR/<step>/ (reports, logs, the fleet report) and DIR/<step>.json, and exits 1 when its
expectation fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rocm_validate.results import jsonfile

REPO = Path(__file__).resolve().parents[1]
SCHEMA: dict[str, Any] = {"title": "fleet acceptance", "type": "object", "required": ["step", "problems"]}
DEFAULT_ARGS = ["--rocm-suite=correctness,perf", "-k", "not compiled and not torchao"]
CONTENTION_ARGS = ["--rocm-suite=perf", "-k", "gemm and bf16 or bandwidth"]
GEMM_LOOP = (
    "import time, torch\n"
    "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
    "end = time.time() + {seconds}\n"
    "while time.time() < end:\n"
    "    for _ in range(20): a @ a\n"
    "    torch.cuda.synchronize()\n"
)


def pinned(gpu: int | None, host: str) -> dict[str, str]:
    """The environment of one 'node': its name, and its GPU as the only one visible."""
    env = {**os.environ, "ROCM_VALIDATE_HOST": host}
    if gpu is not None:
        env.update(CUDA_VISIBLE_DEVICES=str(gpu), HIP_VISIBLE_DEVICES=str(gpu))
    return env


def run_nodes(folder: Path, cpu: bool, pytest_args: list[str]) -> dict[str, Any]:
    """Both 'nodes' side by side, each its own report and log; wall time and exit statuses."""
    folder.mkdir(parents=True, exist_ok=True)
    device = "cpu" if cpu else "0"  # one visible GPU: index 0 of what the pinning leaves
    runs = {}
    started = time.perf_counter()
    for gpu in (0, 1):
        host = f"{'cpu' if cpu else 'gpu'}{gpu}"
        command = [sys.executable, "-m", "pytest", f"--rocm-device={device}", f"--rocm-report={folder / host}.json"]
        command += ["-p", "no:cacheprovider", "-q", *pytest_args]
        log = (folder / f"{host}.log").open("w")
        print(f"$ {host}: {shlex.join(command)}", flush=True)
        process = subprocess.Popen(command, cwd=REPO, env=pinned(None if cpu else gpu, host), stdout=log, stderr=log)
        runs[host] = (command, process, log)
    statuses = {}
    for host, (_, process, log) in runs.items():
        statuses[host] = process.wait()
        log.close()
    return {
        "commands": {h: shlex.join(c) for h, (c, _, _) in runs.items()},
        "exit_status": statuses,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def merge(folder: Path) -> dict[str, Any]:
    """`rocm-validate fleet folder --out folder/fleet`: its exit status, output and fleet report."""
    command = [sys.executable, "-m", "rocm_validate.cli.main", "fleet", str(folder), "--out", str(folder / "fleet")]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    print(done.stdout + done.stderr, flush=True)
    report = folder / "fleet" / "fleet.json"
    fleet = json.loads(report.read_text()) if report.exists() else {}
    return {
        "command": shlex.join(command),
        "exit_status": done.returncode,
        "stdout": done.stdout.splitlines(),
        "verdict": fleet.get("verdict", ""),
        "drain": fleet.get("drain", []),
        "rerun": fleet.get("rerun", []),
        "nodes": {n["name"]: {"action": n["action"], "reasons": n["reasons"]} for n in fleet.get("nodes", [])},
    }


def step_nodes(folder: Path, cpu: bool, pytest_args: list[str]) -> tuple[dict[str, Any], list[str]]:
    runs = run_nodes(folder, cpu, pytest_args or DEFAULT_ARGS)
    merged = merge(folder)
    hosts = sorted(merged["nodes"])
    problems = [] if len(hosts) == 2 and not hosts[0].startswith(hosts[1]) else [f"expected two nodes, found {hosts}"]
    return {"runs": runs, "fleet": merged}, problems


def step_contention(folder: Path, cpu: bool, pytest_args: list[str]) -> tuple[dict[str, Any], list[str]]:
    if cpu:
        return {"skipped": "the CPU has no GPU to contend for"}, []
    loop = subprocess.Popen([sys.executable, "-c", GEMM_LOOP.format(seconds=600)], env=pinned(1, "loop"))
    time.sleep(15)  # the loop's context and first GEMMs up before the measurements start
    try:
        runs = run_nodes(folder, cpu, pytest_args or CONTENTION_ARGS)
    finally:
        loop.terminate()
        loop.wait()
    merged = merge(folder)
    problems = []
    if "gpu1" not in merged["rerun"] + merged["drain"]:
        problems.append(f"gpu1 (the contended GPU) is not named: {merged['verdict']}")
    if "gpu0" in merged["rerun"] + merged["drain"]:
        problems.append(f"gpu0 (idle) is named too: {merged['verdict']}")
    return {"loop_pid": loop.pid, "runs": runs, "fleet": merged}, problems


def step_floors(folder: Path, cpu: bool, pytest_args: list[str]) -> tuple[dict[str, Any], list[str]]:
    folder.mkdir(parents=True, exist_ok=True)
    empty = folder / "empty-baselines"
    empty.mkdir(exist_ok=True)
    report = folder / "collectives.json"
    command = [sys.executable, "-m", "pytest", f"--rocm-device={'cpu' if cpu else 'all'}", "--rocm-suite=collectives"]
    command += [f"--rocm-baselines={empty}", f"--rocm-report={report}", "-p", "no:cacheprovider", "-q", *pytest_args]
    print(f"$ {shlex.join(command)}", flush=True)
    with (folder / "collectives.log").open("w") as log:
        status = subprocess.run(command, cwd=REPO, stdout=log, stderr=log, check=False).returncode
    metrics = json.loads(report.read_text())["metrics"] if report.exists() else []
    rows = [
        {
            "name": m["name"],
            "value": m["value"],
            "verdict": m["verdict"],
            "gated_by": m["extra"].get("gate", {}).get("gated_by"),
            "floor": m["extra"].get("gate", {}).get("floor_value"),
        }
        for m in metrics
        if m["name"].startswith(("collective.", "p2p."))
    ]
    for row in rows:
        print(f"{row['name']:<42} {row['value']:>9.1f}  floor {row['floor'] or '-':>7}  {row['verdict']}")
    gated = [r for r in rows if r["verdict"] != "informational"]
    problems = [] if rows else [f"no collective metrics in {report} (exit {status})"]
    if not cpu:
        problems += [f"{r['name']} is {r['verdict']}, not gated by a floor" for r in gated if r["gated_by"] != "floor"]
    return {"command": shlex.join(command), "exit_status": status, "metrics": rows}, problems


STEPS = {"nodes": step_nodes, "contention": step_contention, "floors": step_floors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--step", choices=sorted(STEPS), required=True)
    parser.add_argument("--cpu", action="store_true", help="two CPU 'nodes' (no contention step, no floors)")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest arguments for the step's runs")
    args = parser.parse_args(argv)
    folder = args.dir / args.step
    result, problems = STEPS[args.step](folder, args.cpu, args.pytest_args)
    result = {"step": args.step, "cpu": args.cpu, **result, "problems": problems}
    jsonfile.write_json(args.dir / f"{args.step}.json", result, SCHEMA)
    for problem in problems:
        print(f"fleet_acceptance {args.step}: {problem}", file=sys.stderr)
    print(f"fleet_acceptance {args.step}: {'FAILED' if problems else 'ok'}; wrote {args.dir / args.step}.json")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
