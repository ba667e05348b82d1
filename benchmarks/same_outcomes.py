"""Compare two runs' JSON reports test for test: the same tests, on the same GPUs, with the same outcomes.

    pytest --rocm-device=all --rocm-suite=all --rocm-report=before.json   # at the old commit
    pytest --rocm-device=all --rocm-suite=all --rocm-report=after.json    # at the new commit
    python benchmarks/same_outcomes.py before.json after.json [--new-ok PREFIX ...]

A refactor must leave every test's outcome as it was: this prints the counts of each report, then
every test that is only in one of them or whose outcome changed, and exits 1 if there is any. Tests
added on purpose (a new suite file) are named with --new-ok and counted apart. A shared test (stack
level: one GPU of the node runs it) is compared by its outcome wherever the scheduler placed it; a
per-GPU test on each GPU. Timings and metrics are not compared: they are noisy, and the perf gate
judges them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

Key = tuple[str, int | None]  # (nodeid, GPU index on the node; None on the CPU and for a shared test)


def outcomes(report: dict[str, Any]) -> dict[Key, str]:
    """Each test's outcome; a shared test's outcomes on every GPU that ran it, joined in order."""
    found: dict[Key, str] = {}
    shared: dict[Key, list[str]] = {}
    for test in report["tests"]:
        if test.get("work") == "shared":
            shared.setdefault((test["nodeid"], None), []).append(test["outcome"])
        else:
            found[(test["nodeid"], (test.get("gpu") or {}).get("index"))] = test["outcome"]
    return found | {key: ", ".join(sorted(runs)) for key, runs in shared.items()}


def differences(before: dict[Key, str], after: dict[Key, str], new_ok: tuple[str, ...]) -> tuple[list[str], int]:
    """Lines naming every test whose presence or outcome differs; and how many tests were added on purpose."""
    lines, added_on_purpose = [], 0
    for key in sorted(set(before) | set(after), key=lambda k: (k[0], -1 if k[1] is None else k[1])):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        where = f"{key[0]}" + ("" if key[1] is None else f" (GPU {key[1]})")
        if old is None and key[0].startswith(new_ok):
            added_on_purpose += 1
        elif old is None:
            lines.append(f"only after: {where}: {new}")
        elif new is None:
            lines.append(f"only before: {where}: {old}")
        else:
            lines.append(f"changed: {where}: {old} -> {new}")
    return lines, added_on_purpose


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--new-ok", action="append", default=[], help="a nodeid prefix of tests added on purpose")
    args = parser.parse_args(argv)
    reports = [json.loads(p.read_text()) for p in (args.before, args.after)]
    for name, report in zip(("before", "after"), reports, strict=True):
        counts = ", ".join(f"{n} {o}" for o, n in sorted(Counter(t["outcome"] for t in report["tests"]).items()))
        print(f"{name}: {len(report['tests'])} tests: {counts}")
    before, after = (outcomes(report) for report in reports)
    lines, added = differences(before, after, tuple(args.new_ok))
    if added:
        print(f"added on purpose ({', '.join(args.new_ok)}): {added}")
    print("\n".join(lines) if lines else "every test present in both has the same outcome on the same GPU")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
