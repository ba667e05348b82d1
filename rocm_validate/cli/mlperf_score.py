"""`rocm-validate mlperf-score DIR`: score an MLPerf run set from the command line.

Exit status 0 when the set passes the RCP check, 1 when it does not, 2 for a wrong request
(no such folder, unknown ruleset, bad RCP file): those print one line, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rocm_validate.convergence.mlperf import DEFAULT_RULESET, RunFacts, RunSetScore

SCORE_SCHEMA: dict[str, Any] = {
    "title": "rocm-validate mlperf-score",
    "type": "object",
    "required": [
        "benchmark",
        "global_batch_size",
        "runs",
        "olympic_mean_minutes",
        "rcp_pass",
        "rcp_message",
        "normalization_factor",
        "score_minutes",
    ],
    "properties": {
        "benchmark": {"type": ["string", "null"]},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["file", "status", "converged", "minutes", "to_converge", "last_eval_accuracy"],
            },
        },
        "olympic_mean_minutes": {"type": ["number", "null"]},
        "rcp_pass": {"type": "boolean"},
        "rcp_message": {"type": "string"},
        "normalization_factor": {"type": ["number", "null"]},
        "score_minutes": {"type": ["number", "null"]},
        "messages": {"type": "array", "items": {"type": "string"}},
    },
}


def add_parser(commands: Any) -> None:
    """Register the mlperf-score subcommand on the rocm-validate parser."""
    parser = commands.add_parser(
        "mlperf-score",
        help="score an MLPerf training run set (result_*.txt): time-to-train, RCP check, normalization",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "folder", metavar="DIR", type=Path, help="folder holding the result_*.txt files of one benchmark"
    )
    parser.add_argument(
        "--ruleset", default=DEFAULT_RULESET, help=f"MLPerf training ruleset (default: {DEFAULT_RULESET})"
    )
    parser.add_argument(
        "--rcp", type=Path, metavar="FILE", help="RCP file in mlperf-logging's format instead of its packaged RCPs"
    )
    parser.add_argument(
        "--bert-train-samples",
        action="store_true",
        help="count BERT's samples from train_samples instead of eval_accuracy's epoch_num (package checker option)",
    )
    parser.add_argument("--no-compliance", action="store_true", help="skip MLPerf's per-file compliance checker")
    parser.add_argument("--json", action="store_true", help="print the score as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rocm_validate.convergence.mlperf import score_run_set
    from rocm_validate.errors import CommandError, MlperfError
    from rocm_validate.results import jsonfile

    try:
        score = score_run_set(args.folder, args.ruleset, args.rcp, args.bert_train_samples, not args.no_compliance)
    except MlperfError as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        data = score.to_dict()
        problems = jsonfile.schema_errors(data, SCORE_SCHEMA)
        if problems:
            raise CommandError(f"score breaks its schema: {'; '.join(problems)}")
        sys.stdout.write(jsonfile.dumps(data))
    else:
        print("\n".join(render(score)))
    return 0 if score.rcp.passed else 1


_COLUMNS = ("run", "status", "minutes", "to converge", "eval acc", "samples/s", "compliance")


def _row(run: RunFacts) -> tuple[str, ...]:
    return (
        run.file,
        run.status,
        _fixed(run.minutes, 2),
        _count_text(run.to_converge),
        _fixed(run.last_eval_accuracy, 4),
        _fixed(run.samples_per_second, 1),
        "ok" if not run.compliance else f"{len(run.compliance)} issue{'' if len(run.compliance) == 1 else 's'}",
    )


def _fixed(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render(score: RunSetScore) -> list[str]:
    """The score as a table of runs followed by the set's verdict, one fact a line."""
    unit = score.runs[0].convergence_unit if score.runs else "samples"
    rows = [(*_COLUMNS[:3], f"{unit} to converge", *_COLUMNS[4:]), *(_row(r) for r in score.runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = [
        f"{score.folder}: {score.benchmark or 'unknown benchmark'}, global batch size {score.global_batch_size}, "
        f"{len(score.runs)} run{'' if len(score.runs) == 1 else 's'}, ruleset {score.ruleset}, RCPs from {score.rcp_source}",
        "",
    ]
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines += ["", *(f"  {m}" for m in score.messages)] if score.messages else []
    lines += _compliance_lines(score.runs)
    record = score.rcp.record
    lines += [
        "",
        f"olympic mean: {_fixed(score.olympic_mean_minutes, 3)} minutes, {_count_text(score.olympic_mean_to_converge)} {unit} to converge",
        f"RCP check: {'PASS' if score.rcp.passed else 'FAIL'} ({score.rcp.message})",
    ]
    if record:
        lines.append(
            f"  RCP mean {_count_text(record['mean'])} {unit}, stdev {_count_text(record['stdev'])}, fastest mean allowed "
            f"{_count_text(record['min_acceptable_mean'])} (max speedup {record['max_speedup']:.4f})"
        )
    lines += [
        f"normalization factor: {_fixed(score.rcp.normalization_factor, 4)}",
        f"score: {_fixed(score.score_minutes, 3)} minutes"
        + ("" if score.score_minutes is not None else " (no valid score)"),
    ]
    return lines


def _count_text(value: float | None) -> str:
    """Sample counts in full with separators (2,457,600); epochs with four significant digits."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _compliance_lines(runs: tuple[RunFacts, ...]) -> list[str]:
    """Each distinct compliance complaint once, with the runs it concerns."""
    where: dict[str, list[str]] = {}
    for run in runs:
        for message in run.compliance:
            where.setdefault(message, []).append(run.file)
    if not where:
        return []
    lines = ["", "MLPerf compliance checker:"]
    for message, files in where.items():
        scope = "all runs" if len(files) == len(runs) else ", ".join(files)
        lines.append(f"  {message} ({scope})")
    return lines
