"""`rocm-validate mlperf-score DIR`: score an MLPerf run set from the command line.

Exit status 0 when the set passes the RCP check, 1 when it does not, 2 for a wrong request
(no such folder, unknown ruleset, runs whose benchmark has its RCPs in another ruleset, bad RCP
file): those print one line, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rocm_validate.convergence.mlperf import DEFAULT_RULESET, NOT_CHECKED, RunFacts, RunSetScore

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
        "convergence_unit": {"enum": ["samples", "epochs", "tokens", "steps"]},
        "eval_metric": {
            "type": "object",
            "required": ["name", "better"],
            "properties": {"name": {"type": "string"}, "better": {"enum": ["higher", "lower", None]}},
        },
        "olympic_mean_minutes": {"type": ["number", "null"]},
        "rcp_pass": {"type": "boolean"},
        "rcp_message": {"type": "string"},
        "normalization_factor": {"type": ["number", "null"]},
        "score_minutes": {"type": ["number", "null"]},
        "failure_category": {"enum": ["configuration", "numerics", None]},
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


def _row(run: RunFacts, compliance_checked: bool) -> tuple[str, ...]:
    issues = sum(1 for note in run.compliance if not note.startswith(NOT_CHECKED))
    return (
        run.file,
        run.status,
        _fixed(run.minutes, 2),
        _count_text(run.to_converge),
        _fixed(run.last_eval_accuracy, 4),
        _fixed(run.samples_per_second, 1),
        NOT_CHECKED
        if not compliance_checked or (run.compliance and not issues)
        else "ok"
        if not issues
        else f"{issues} issue{'' if issues == 1 else 's'}",
    )


def _fixed(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render(score: RunSetScore) -> list[str]:
    """The score as a table of runs followed by the set's verdict, one fact a line."""
    unit = score.convergence_unit
    header = ("run", "status", "minutes", f"{unit} to converge", score.eval_metric.label, "samples/s", "compliance")
    rows = [header, *(_row(r, score.compliance_checked) for r in score.runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
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
    return lines + _score_lines(score)


def _score_lines(score: RunSetScore) -> list[str]:
    """The normalization factor and the score, in full digits, as result_summarizer forms them."""
    factor, minutes = score.rcp.normalization_factor, score.score_minutes
    if minutes is None or factor is None:
        why = "the set fails MLPerf's RCP check" if not score.rcp.passed else "no olympic mean"
        return [f"normalization factor: - (none applies: {why})", f"score: - minutes (no valid score: {why})"]
    faster = (
        f" (RCP mean / olympic mean {score.convergence_unit}: faster than the reference, within the allowed speedup)"
        if factor > 1
        else ""
    )
    return [
        f"normalization factor: {factor!r}{faster}",
        f"score: {minutes:.3f} minutes ({minutes!r}: olympic mean {score.olympic_mean_minutes!r} x {factor!r})",
    ]


def _count_text(value: float | None) -> str:
    """Sample counts in full with separators (2,457,600); epochs with four significant digits."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _compliance_rule(message: str) -> str:
    """What a complaint says without the copy of the log line and the checker's state dumps, which
    differ between files: runs that break one rule the same way are listed together."""
    kept = []
    for line in message.splitlines():
        if line.startswith(("current context", "current line")):
            break
        if not line.startswith(":::MLLOG"):
            kept.append(line)
    return "\n".join(kept)


def _compliance_lines(runs: tuple[RunFacts, ...]) -> list[str]:
    """Each compliance complaint once, in full, with the runs it concerns (runs that break one rule
    the same way are listed together; the full text shown is the first run's)."""
    where: dict[str, list[tuple[str, str]]] = {}
    for run in runs:
        for message in run.compliance:
            where.setdefault(_compliance_rule(message), []).append((run.file, message))
    if not where:
        return []
    lines = ["", "MLPerf compliance checker:"]
    for found in where.values():
        scope = "all runs" if len(found) == len(runs) else ", ".join(file for file, _ in found)
        if len({message for _, message in found}) > 1:
            scope += f"; in full for {found[0][0]}"
        first, *rest = found[0][1].splitlines()
        lines.append(f"  {first.rstrip(':')} ({scope})")
        lines += [f"      {line}".rstrip() for line in rest]
    return lines
