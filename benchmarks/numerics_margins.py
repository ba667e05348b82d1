"""Summarize the correctness suite's margins from its JSON report, per check family.

    pytest --rocm-suite=correctness --rocm-report=report.json
    python benchmarks/numerics_margins.py report.json [--out margins.json]

For every family (the check name up to its '[' details, e.g. 'sdpa.flash.grad_q', and the precision
its error model judged it in), the worst healthy value of each statistic the tolerance table bounds:
element ratio (vs k), norm ratio (vs k_norm), lowest SQNR (vs min_sqnr_db), the worst element
against the error model (model ratio, vs 1), the error norm against the model (vs 1) and the largest
lean (in ulps of the precision, and relative, vs the allowed lean) and the error norm over what a
correct implementation makes (accuracy ratio, vs the row's factor). These are the numbers the
table's rows are set from (docs/correctness.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def family(check: str) -> str:
    """'sdpa.flash.grad_q [B4 H16 ...]' -> 'sdpa.flash.grad_q'; numbered optimizer tensors fold too."""
    name = check.split(" [", 1)[0].split(" (", 1)[0]
    return name.split("[", 1)[0]


STATISTICS = (
    ("ratio", max),
    ("norm_ratio", max),
    ("sqnr_db", min),
    ("model_ratio", max),
    ("model_norm_ratio", max),
    ("lean_ulps", max),
    ("accuracy_ratio", max),
)
BOUNDS = ("k", "k_norm", "min_sqnr_db", "allowed_lean", "accuracy_factor")


def summarize(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for test in report["tests"]:
        for check in test.get("numerics", []):
            name = family(check["check"])
            if check.get("precision"):
                name = f"{name} {check['precision']}"
            row = rows.setdefault(name, {"checks": 0, "failed": 0})
            row["checks"] += 1
            row["failed"] += 0 if check["passed"] else 1
            for key, pick in STATISTICS:
                if check.get(key) is not None:
                    row[key] = pick(row.get(key, check[key]), check[key])
            if check.get("lean") is not None and abs(check["lean"]) >= abs(row.get("lean", 0.0)):
                row["lean"] = check["lean"]
            for key in BOUNDS:
                row[key] = check.get(key)
    return dict(sorted(rows.items()))


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    report = json.loads(args.report.read_text())
    rows = summarize(report)
    device = report.get("device") or {}
    print(f"{device.get('name')} ({device.get('arch')}), torch {device.get('torch_version')}")
    print(
        f"{'family':52} {'n':>4} {'fail':>4} {'ratio/k':>14} {'norm/k_norm':>16} {'sqnr/min':>14} "
        f"{'model':>7} {'m.norm':>7} {'lean/allowed':>18} {'accuracy/factor':>16}"
    )
    for name, row in rows.items():

        def pair(value: str, bound: str, row: dict = row) -> str:
            v, b = row.get(value), row.get(bound)
            return f"{'-' if v is None else f'{v:.3g}'}/{'-' if b is None else f'{b:g}'}"

        print(
            f"{name:52} {row['checks']:4} {row['failed']:4} {pair('ratio', 'k'):>14} {pair('norm_ratio', 'k_norm'):>16} "
            f"{pair('sqnr_db', 'min_sqnr_db'):>14} {_value(row.get('model_ratio')):>7} "
            f"{_value(row.get('model_norm_ratio')):>7} {pair('lean', 'allowed_lean'):>18} "
            f"{pair('accuracy_ratio', 'accuracy_factor'):>16}"
        )
    if args.out:
        args.out.write_text(json.dumps({"device": device, "families": rows}, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
