"""MLPerf training results: read MLLOG result files, score a run set, get the RCP verdict.

Every RCP verdict and statistic comes from mlperf-logging's `rcp_checker` (its packaged RCP
tables, or an RCP file in the same format); this module only makes sure the checker is handed
files it can read, and turns what it says into per-file messages instead of tracebacks:

* each `result_*.txt` is parsed here first; a file with lines the MLPerf parser cannot read is
  not accepted (as MLPerf's package checker refuses it) and is handed to the checker as a run
  that did not converge, so olympic scoring may drop it, as it drops one unconverged run;
* set-level problems the checker cannot handle (mixed batch sizes or benchmarks, a benchmark
  it has no table for, fewer than three runs) become `rcp_pass: false` with a message naming
  the files, where the checker itself would raise.

Time-to-train is MLPerf's: minutes from `run_start` to `run_stop` (computed as MLPerf's
result_summarizer computes them, so scores agree to the last digit), olympic mean over the runs
(fastest and slowest dropped; a run that did not converge counts as the slowest).

Each failure carries its category (`RunFacts.failure_category`, `RunSetScore.failure_category`):
`configuration` when the inputs are at fault (an unreadable or incomplete file, a set the checker
cannot compare, no RCP for the batch size), `numerics` when the runs themselves converged wrongly.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import math
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocm_validate.convergence.mlperf_benchmarks import EvalMetric, convergence_count, eval_metric, ruleset_version
from rocm_validate.errors import JsonFileError, MlperfError

DEFAULT_RULESET = "5.0.0"  # MLPerf training ruleset of the RCP check
TOKEN = ":::MLLOG "
USAGE = "training"
RESULT_GLOB = "result_*.txt"
NOT_CHECKED = "not checked"  # a compliance note that is no complaint (the checker was not run on the file)
ROCM_VALIDATE_KEY = "rocm_validate_benchmark"  # marks files written by rocm-validate's mini-BERT
_REQUIRED_FIELDS = ("time_ms", "key", "value", "metadata")
_STAND_IN_KEYS = ("submission_benchmark", "global_batch_size")
# rcp_checker.RCP_Checker._process_raw_rcp_data: these benchmarks' records hold "samples to converge"
_SAMPLES_KEYED_RCPS = frozenset({"llama2_70b_lora", "flux1"})

RCP_FILE_SCHEMA: dict[str, Any] = {
    "title": "mlperf-logging RCP",
    "type": "object",
    "minProperties": 1,
    "additionalProperties": {
        "type": "object",
        "required": ["Benchmark", "BS", "Hyperparams"],
        "properties": {
            "Benchmark": {"type": "string"},
            "BS": {"type": "integer", "minimum": 1},
            "Hyperparams": {"type": "object"},
            "Epochs to converge": {"type": "array", "items": {"type": "number"}, "minItems": 3},
            "samples to converge": {"type": "array", "items": {"type": "number"}, "minItems": 3},
        },
        "oneOf": [{"required": ["Epochs to converge"]}, {"required": ["samples to converge"]}],
    },
}


@dataclass(frozen=True)
class MllogLine:
    """One well-formed MLLOG event."""

    lineno: int  # 1-based line number in the file
    text: str  # the line from the MLLOG token on
    key: str
    value: Any
    metadata: dict[str, Any]
    time_ms: float


@dataclass(frozen=True)
class ParsedLog:
    """The MLLOG events of a file and the lines that could not be read."""

    lines: tuple[MllogLine, ...]
    problems: tuple[str, ...]

    def first(self, key: str) -> MllogLine | None:
        return next((line for line in self.lines if line.key == key), None)

    def last(self, key: str) -> MllogLine | None:
        return next((line for line in reversed(self.lines) if line.key == key), None)


def parse_mllog_text(text: str) -> ParsedLog:
    """Every ':::MLLOG {...}' line (text before the token is ignored, as MLPerf's parser does)."""
    lines, problems = [], []
    for number, raw in enumerate(text.splitlines(), start=1):
        if TOKEN not in raw:
            continue
        body = raw[raw.index(TOKEN) :].strip()
        problem = None
        try:
            event = json.loads(body[len(TOKEN) :])
        except json.JSONDecodeError as exc:
            problem = f"not JSON ({exc.msg} at column {exc.colno + len(TOKEN)})"
        else:
            problem = _event_problem(event)
        if problem:
            problems.append(f"line {number}: {problem}")
            continue
        lines.append(
            MllogLine(number, body, event["key"], event["value"], event["metadata"] or {}, float(event["time_ms"]))
        )
    return ParsedLog(tuple(lines), tuple(problems))


def _event_problem(event: Any) -> str | None:
    if not isinstance(event, dict):
        return f"expected a JSON object, found {type(event).__name__}"
    missing = [name for name in _REQUIRED_FIELDS if name not in event]
    if missing:
        return f"MLLOG event lacks {', '.join(missing)}"
    if not isinstance(event["key"], str):
        return f"key must be a string, found {event['key']!r}"
    if _numeric_value(event["time_ms"]) is None:
        return f"time_ms must be a finite number, found {event['time_ms']!r}"
    if event["metadata"] is not None and not isinstance(event["metadata"], dict):
        return f"metadata must be an object, found {type(event['metadata']).__name__}"
    if event["key"] == "run_stop" and "status" not in (event["metadata"] or {}):
        return "run_stop has no status in its metadata"
    return None


def read_mllog(path: Path) -> ParsedLog:
    """Parse a result file; latin-1 like MLPerf's tools, so no byte makes it unreadable."""
    try:
        parsed = parse_mllog_text(path.read_text(encoding="latin-1"))
    except OSError as exc:
        return ParsedLog((), (f"cannot be read ({exc.strerror or exc})",))
    if not parsed.lines and not parsed.problems:
        return ParsedLog((), (f"holds no '{TOKEN.strip()}' line: not an MLPerf result log",))
    return parsed


@dataclass(frozen=True)
class RunFacts:
    """One run of a result set, as MLPerf scores it."""

    file: str
    benchmark: str | None
    global_batch_size: Any
    status: str  # run_stop's status ("success", "aborted"), "no run_stop", or "unreadable"
    minutes: float | None  # run_start to run_stop
    to_converge: float | None  # what the RCP checker counts (samples for BERT), when converged
    convergence_unit: str  # "samples" or "epochs"
    last_eval_accuracy: float | None
    samples_per_second: float | None
    problems: tuple[str, ...] = ()
    compliance: tuple[str, ...] = ()  # messages of MLPerf's compliance checker; empty when compliant
    rocm_validate_benchmark: str | None = None

    @property
    def accepted(self) -> bool:
        """Readable by MLPerf's tools (else scored as a run that did not converge)."""
        return not self.problems

    @property
    def converged(self) -> bool:
        return self.accepted and self.status == "success" and self.to_converge is not None

    @property
    def failure_category(self) -> str | None:
        """'numerics' for a complete run that did not converge; 'configuration' for a file that is
        unreadable or incomplete (the input is at fault, not the stack); None when it converged."""
        if self.converged:
            return None
        return "numerics" if self.accepted and self.status not in ("success", "no run_stop") else "configuration"

    def message(self) -> str:
        """What went wrong with this run, or '' when it converged."""
        if self.converged:
            return ""
        notes = list(self.problems)
        if self.status not in ("success", "unreadable"):  # an unreadable file's problems already say so
            notes.append(
                _STATUS_NOTES.get(self.status, f"run_stop status is {self.status!r}: the run did not converge")
            )
        return f"{self.file}: " + ("; ".join(notes) or "MLPerf's RCP checker does not count it as converged")

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "benchmark": self.benchmark,
            "global_batch_size": self.global_batch_size,
            "status": self.status,
            "converged": self.converged,
            "minutes": self.minutes,
            "to_converge": self.to_converge,
            "convergence_unit": self.convergence_unit,
            "last_eval_accuracy": self.last_eval_accuracy,
            "samples_per_second": self.samples_per_second,
            "problems": list(self.problems),
            "compliance": list(self.compliance),
        }


_STATUS_NOTES = {
    "no run_stop": (
        "no run_stop line: the log is incomplete (the run is still going or stopped without logging its end) "
        "and counts as not converged; score complete logs"
    ),
    "unreadable": "not accepted, counted as a run that did not converge",
}


def run_facts(
    path: Path,
    parsed: ParsedLog,
    checker_view: tuple[int, float, Any, Any] | None,
    problems: Sequence[str],
    compliance: Sequence[str] = (),
    ruleset: str = DEFAULT_RULESET,
) -> RunFacts:
    """Facts of one run from its parsed lines and what the RCP checker read from it."""
    benchmark_line, batch_line = parsed.first("submission_benchmark"), parsed.first("global_batch_size")
    benchmark = benchmark_line.value if benchmark_line else None
    start, stop = parsed.first("run_start"), parsed.first("run_stop")
    status = "unreadable" if problems else (str(stop.metadata.get("status")) if stop else "no run_stop")
    # result_summarizer: time_to_train_ms / 60 / 1000, divided in that order
    minutes = (stop.time_ms - start.time_ms) / 60 / 1000 if start and stop and stop.time_ms >= start.time_ms else None
    to_converge = None
    if checker_view is not None and not problems:
        not_converged, counted = checker_view[0], checker_view[1]
        to_converge = None if not_converged else float(counted)
    benchmark_name = benchmark if isinstance(benchmark, str) else None
    count = convergence_count(benchmark_name, ruleset)  # the eval count; BERT's unit is samples either way
    marker = parsed.first(ROCM_VALIDATE_KEY)
    return RunFacts(
        file=path.name,
        benchmark=benchmark,
        global_batch_size=batch_line.value if batch_line else None,
        status=status,
        minutes=minutes,
        to_converge=to_converge,
        convergence_unit=count.unit,
        # a file not accepted shows no figures: they may be another run's (logs run together)
        last_eval_accuracy=None if problems else _metric_value(parsed, eval_metric(benchmark_name)),
        samples_per_second=None if problems else _throughput(parsed, benchmark_name, count.key, count.unit, minutes),
        problems=tuple(problems),
        compliance=tuple(compliance),
        rocm_validate_benchmark=str(marker.value) if marker else None,
    )


def _numeric_value(value: Any) -> float | None:
    """A finite number, or None (booleans, strings, NaN and infinities are not measurements)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _metric_value(parsed: ParsedLog, metric: EvalMetric) -> float | None:
    """The last evaluation's value of `metric` (stable diffusion's FID line, Mask R-CNN's BBOX)."""
    lines = [line for line in parsed.lines if line.key == "eval_accuracy"]
    if metric.metadata_metric:
        lines = [line for line in lines if line.metadata.get("metric") == metric.metadata_metric]
    if not lines:
        return None
    value = lines[-1].value
    if metric.value_key and isinstance(value, dict):
        value = value.get(metric.value_key)
    return _numeric_value(value)


def _throughput(parsed: ParsedLog, benchmark: str | None, key: str, unit: str, minutes: float | None) -> float | None:
    """Samples trained per second of timed run (evaluations included, as in time-to-train), from
    the count the benchmark really keeps: samples where it counts samples (BERT's train_samples,
    else the last evaluation's count), steps x batch, tokens / sequence length, or epochs x the
    training-set size (train_samples, in the epoch-counted benchmarks)."""
    if not minutes:
        return None
    evaluation = parsed.last("eval_accuracy")
    counted = _numeric_value(evaluation.metadata.get(key)) if evaluation else None
    trained = parsed.last("train_samples")
    trained_value = _numeric_value(trained.value) if trained else None
    samples = None
    if benchmark == "bert":
        samples = trained_value if trained_value is not None else counted
    elif unit == "samples":
        samples = counted
    elif counted is not None:
        factor_key = {"steps": "global_batch_size", "tokens": "max_sequence_length"}.get(unit)
        factor_line = parsed.first(factor_key) if factor_key else None
        factor = _numeric_value(factor_line.value) if factor_line else None
        if unit == "steps" and factor is not None:
            samples = counted * factor
        elif unit == "tokens" and factor:
            samples = counted / factor
        elif unit == "epochs" and trained_value is not None:
            samples = counted * trained_value
    return None if samples is None else _numeric_value(samples / (minutes * 60.0))


def olympic_mean(values: Sequence[float], dropped: int = 0, max_dropped: int = 1) -> float | None:
    """MLPerf's olympic mean: drop the `max_dropped` fastest and slowest and average the rest.

    `values` are the runs that count; `dropped` runs (that did not converge) already stand for
    that many of the slowest. None when nothing is left or too many runs were dropped.
    """
    if dropped > max_dropped:
        return None
    ordered = sorted(values)
    kept = ordered[max_dropped : len(ordered) - (max_dropped - dropped)]
    return sum(kept) / len(kept) if kept else None


def max_dropped_runs(benchmark: str | None) -> int:
    """How many runs olympic scoring drops at each end (4 for unet3d, else 1), as MLPerf does."""
    return 4 if benchmark == "unet3d" else 1


@contextlib.contextmanager
def mllog_writer(path: Path) -> Iterator[Any]:
    """mlperf-logging's MLLogger writing to `path` only (not to stdout, not to the root logger)."""
    from mlperf_logging.mllog import mllog

    logger = logging.getLogger(f"rocm_validate.mllog.{path.resolve()}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    logger.addHandler(handler)
    try:
        yield mllog.MLLogger(logger=logger, default_namespace="")
    finally:
        logger.removeHandler(handler)
        handler.close()


# --- the checker: found without importing it, called with its logging captured ---------------


def _package_folder(module: str) -> Path | None:
    spec = importlib.util.find_spec("mlperf_logging")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / module


def available_rulesets(usage: str = USAGE) -> tuple[str, ...]:
    """Rulesets mlperf-logging has RCP tables for, e.g. ('1.0.0', ..., '5.0.0'); no import needed."""
    folder = _package_folder("rcp_checker")
    if folder is None or not folder.is_dir():
        return ()
    versions = [p.name.split("_", 1)[1] for p in folder.glob(f"{usage}_*") if p.is_dir()]
    return tuple(sorted(versions, key=ruleset_version))


def require_ruleset(ruleset: str, usage: str = USAGE) -> None:
    """Raise MlperfError naming the accepted rulesets when mlperf-logging has no such ruleset."""
    known = available_rulesets(usage)
    if not known:
        raise MlperfError("mlperf-logging is not installed; install it with: pip install mlperf-logging")
    if ruleset not in known:
        raise MlperfError(f"unknown MLPerf {usage} ruleset {ruleset!r}; mlperf-logging has {', '.join(known)}")


@dataclass
class _LogCapture(logging.Filter):
    """Keeps mlperf-logging's log records (it logs through the root logger) out of the output."""

    records: list[logging.LogRecord] = field(default_factory=list)

    def filter(self, record: logging.LogRecord) -> bool:
        if "mlperf_logging" in record.pathname:
            self.records.append(record)
            return False
        return True

    def warnings(self) -> list[str]:
        return [r.getMessage().strip() for r in self.records if r.levelno >= logging.WARNING]


@contextlib.contextmanager
def captured_checker_logs() -> Iterator[_LogCapture]:
    """Capture what the checkers log; a stand-in handler stops logging.basicConfig being called."""
    root = logging.getLogger()
    capture = _LogCapture()
    stand_in = logging.NullHandler() if not root.handlers else None
    if stand_in is not None:
        root.addHandler(stand_in)
    root.addFilter(capture)
    try:
        yield capture
    finally:
        root.removeFilter(capture)
        if stand_in is not None:
            root.removeHandler(stand_in)


def compliance_messages(path: Path, ruleset: str, usage: str = USAGE) -> tuple[str, ...]:
    """MLPerf's compliance checker on one file: each complaint in full (the line it concerns, the
    rule that failed, the checker's state), none when the file is compliant."""
    from mlperf_logging.compliance_checker import mlp_compliance

    checker = mlp_compliance.make_checker(usage, ruleset, True, False)
    mlp_compliance.enqueued_configs.clear()  # module-level queue; a failed earlier check may leave entries
    with captured_checker_logs():
        try:
            checker.check_file(str(path), f"{usage}_{ruleset}/common.yaml")
        except Exception as exc:
            return (f"the compliance checker stopped: {type(exc).__name__}: {exc}",)
    messages = [*checker.overwritable.values(), *checker.not_overwritable]
    return tuple(dict.fromkeys(m.strip() for m in messages if m.strip()))


# --- scoring a run set ---------------------------------------------------------------------


@dataclass(frozen=True)
class RcpVerdict:
    """What mlperf-logging's RCP checker said about a run set."""

    passed: bool
    message: str
    normalization_factor: float | None  # None where the checker could not be run
    record: dict[str, Any] | None = None  # the RCP record compared against (mean, stdev, max speedup)
    checker_warnings: tuple[str, ...] = ()
    blocked: bool = False  # the set could not be handed to the checker (the message says why)
    rcp_batch_sizes: tuple[Any, ...] = ()  # the batch sizes the checker had RCPs for


@dataclass(frozen=True)
class RunSetScore:
    """A run set scored the MLPerf way."""

    folder: str
    ruleset: str
    rcp_source: str  # the RCP file, or mlperf-logging's packaged table
    benchmark: str | None
    global_batch_size: Any
    runs: tuple[RunFacts, ...]
    olympic_mean_minutes: float | None
    olympic_mean_to_converge: float | None
    rcp: RcpVerdict
    required_runs: int | None
    messages: tuple[str, ...]
    compliance_checked: bool = True

    @property
    def score_minutes(self) -> float | None:
        """Olympic-mean minutes times the normalization factor, for a set that passes: the
        product result_summarizer forms once the package checker has set the scaling."""
        if not self.rcp.passed or self.olympic_mean_minutes is None or self.rcp.normalization_factor is None:
            return None
        return self.olympic_mean_minutes * self.rcp.normalization_factor

    @property
    def convergence_unit(self) -> str:
        """What the counts to converge count: 'samples', 'epochs', 'tokens' or 'steps'."""
        return convergence_count(self.benchmark, self.ruleset).unit

    @property
    def eval_metric(self) -> EvalMetric:
        """The metric behind the runs' eval_accuracy and which way is better."""
        return eval_metric(self.benchmark)

    @property
    def failure_category(self) -> str | None:
        """None when the set passes; 'numerics' when the checker judged the runs' convergence and
        it failed (faster than the reference allows, or too many runs that really did not converge);
        'configuration' when the inputs are at fault (a set the checker cannot compare, no RCP for
        this batch size, runs unreadable or incomplete)."""
        if self.rcp.passed:
            return None
        if self.rcp.message in ("RCP found", "RCP Interpolation"):
            return "numerics"
        if self.rcp.message == "Insufficient convergence":
            failed = sum(1 for run in self.runs if run.failure_category == "numerics")
            return "numerics" if failed > max_dropped_runs(self.benchmark) else "configuration"
        return "configuration"

    def to_dict(self) -> dict[str, Any]:
        metric = self.eval_metric
        return {
            "folder": self.folder,
            "ruleset": self.ruleset,
            "rcp_source": self.rcp_source,
            "benchmark": self.benchmark,
            "global_batch_size": self.global_batch_size,
            "required_runs": self.required_runs,
            "convergence_unit": self.convergence_unit,
            "eval_metric": {"name": metric.name, "better": metric.better},
            "compliance_checked": self.compliance_checked,
            "runs": [r.to_dict() for r in self.runs],
            "olympic_mean_minutes": self.olympic_mean_minutes,
            "olympic_mean_to_converge": self.olympic_mean_to_converge,
            "rcp_pass": self.rcp.passed,
            "rcp_message": self.rcp.message,
            "rcp_record": self.rcp.record,
            "normalization_factor": self.rcp.normalization_factor,
            "score_minutes": self.score_minutes,
            "failure_category": self.failure_category,
            "messages": list(self.messages),
        }


def load_rcp_file(path: Path) -> dict[str, Any]:
    """An RCP file in mlperf-logging's format, checked so the checker cannot trip on it."""
    from rocm_validate.results import jsonfile

    fix = "Pass an RCP file in mlperf-logging's rcps_<benchmark>.json format."
    try:
        data = jsonfile.read_json(path, RCP_FILE_SCHEMA, fix=fix)
    except JsonFileError as exc:
        raise MlperfError(str(exc)) from None
    for name, record in data.items():
        wanted = "samples to converge" if record["Benchmark"] in _SAMPLES_KEYED_RCPS else "Epochs to converge"
        if wanted not in record:
            raise MlperfError(
                f"{path}: record {name!r} ({record['Benchmark']}) has no {wanted!r}, which is where MLPerf's RCP "
                f"checker reads {record['Benchmark']}'s counts to converge. {fix}"
            )
    return data


def result_files(folder: Path) -> list[Path]:
    """The run set: result_*.txt in `folder`, in natural order (result_2 before result_10)."""
    if not folder.is_dir():
        what = "does not exist" if not folder.exists() else "is not a folder"
        raise MlperfError(f"{folder} {what}; pass the folder that holds the result_*.txt files of one benchmark")
    found = [p for p in folder.glob(RESULT_GLOB) if p.is_file()]
    return sorted(found, key=lambda p: [int(t) if t.isdigit() else t for t in re.findall(r"\d+|\D+", p.name)])


def packaged_rcp_rulesets(benchmark: str, usage: str = USAGE) -> tuple[str, ...]:
    """The rulesets whose packaged RCP tables hold `benchmark`, oldest first; no import needed."""
    folder = _package_folder("rcp_checker")
    return tuple(
        ruleset
        for ruleset in available_rulesets(usage)
        if folder is not None and (folder / f"{usage}_{ruleset}" / f"rcps_{benchmark}.json").is_file()
    )


def common_benchmark(logs: Sequence[ParsedLog]) -> str | None:
    """The benchmark the logs' submission_benchmark lines agree on, or None (none, or they differ)."""
    named = [line.value for line in (log.first("submission_benchmark") for log in logs) if line is not None]
    return named[0] if named and isinstance(named[0], str) and all(name == named[0] for name in named) else None


def require_one_benchmark(files: Sequence[Path], logs: Sequence[ParsedLog]) -> None:
    """Raise MlperfError (a usage error) when the files are runs of several benchmarks: a set is
    one benchmark's runs, and an olympic mean or RCP check over two means nothing."""
    named: dict[str, list[str]] = {}
    for path, log in zip(files, logs):
        line = log.first("submission_benchmark")
        if line is not None:
            named.setdefault(str(line.value), []).append(path.name)
    if len(named) > 1:
        listed = "; ".join(f"{benchmark}: {_files(names)}" for benchmark, names in named.items())
        folder = files[0].parent
        raise MlperfError(
            f"{folder} holds runs of {len(named)} benchmarks ({listed}); a run set is one benchmark's runs: "
            "score each benchmark's result files in a folder of their own"
        )


def require_packaged_rcps(benchmark: str | None, ruleset: str, option: str = "--ruleset") -> None:
    """Raise MlperfError (a usage error) when mlperf-logging has `benchmark`'s RCPs, but not in
    `ruleset`: the runs were made under another ruleset, which the message names with `option`."""
    if not benchmark:
        return
    holding = packaged_rcp_rulesets(benchmark)
    if not holding or ruleset in holding:
        return
    newer = [r for r in holding if ruleset_version(r) > ruleset_version(ruleset)]
    suggested = newer[0] if newer else holding[-1]
    raise MlperfError(
        f"the runs are MLPerf {benchmark}, and mlperf-logging's training {ruleset} ruleset has no {benchmark} RCPs "
        f"(its rulesets {', '.join(holding)} have them); score them under the ruleset they were run for, "
        f"e.g. {option}={suggested}"
    )


def score_run_set(
    folder: Path,
    ruleset: str = DEFAULT_RULESET,
    rcp_path: Path | None = None,
    use_train_samples: bool = False,
    compliance: bool = True,
) -> RunSetScore:
    """Score the result_*.txt files of `folder`: per-run facts, olympic mean, RCP verdict, score.

    Raises MlperfError for a wrong request (missing folder, no result files, unknown ruleset,
    bad RCP file, runs of a benchmark whose RCPs live in another ruleset); every problem of the
    runs themselves is reported in the score.
    """
    require_ruleset(ruleset)
    files = result_files(folder)
    if not files:
        raise MlperfError(f"{folder} holds no {RESULT_GLOB} files; MLPerf names each run's log result_<n>.txt")
    rcp_data = load_rcp_file(rcp_path) if rcp_path is not None else None
    logs = [read_mllog(path) for path in files]
    require_one_benchmark(files, logs)
    if rcp_data is None:
        require_packaged_rcps(common_benchmark(logs), ruleset)
    from mlperf_logging.rcp_checker import rcp_checker

    runs: list[RunFacts] = []
    with tempfile.TemporaryDirectory(prefix="rocm-validate-mlperf-") as staging:
        staged = Path(staging)
        for path, parsed in zip(files, logs):
            runs.append(
                _stage_run(path, parsed, staged / path.name, ruleset, use_train_samples, compliance, rcp_checker)
            )
        benchmark, batch, blockers = _set_identity(runs)
        required = rcp_checker.submission_runs.get(USAGE, {}).get(benchmark) if benchmark else None
        blockers += _checker_blockers(benchmark, ruleset, rcp_data, rcp_path, runs, rcp_checker)
        if blockers or benchmark is None:  # no benchmark line is a blocker already
            verdict = RcpVerdict(False, "; ".join(blockers), None, blocked=True)
        else:
            verdict = _run_checker(staged, ruleset, use_train_samples, rcp_path, benchmark, batch, rcp_checker)
    converged = [r for r in runs if r.converged]
    dropped = len(runs) - len(converged)
    limit = max_dropped_runs(benchmark)
    mean_minutes = olympic_mean([r.minutes for r in converged if r.minutes is not None], dropped, limit)
    mean_counted = olympic_mean([r.to_converge for r in converged if r.to_converge is not None], dropped, limit)
    messages = [m for m in (r.message() for r in runs) if m]
    if dropped > limit:
        messages.append(f"{dropped} of {len(runs)} runs did not converge; olympic scoring drops at most {limit}")
    if required and len(runs) < required:
        messages.append(
            f"{_runs(len(runs))}; MLPerf {benchmark} needs {required}, and the RCP statistics assume {required}"
        )
    if verdict.message.startswith(("Missing RCP", "Cannot find any RCPs")) and verdict.rcp_batch_sizes:
        sizes = ", ".join(str(size) for size in verdict.rcp_batch_sizes)
        messages.append(
            f"the RCPs of {benchmark} in {_rcp_source(rcp_path, ruleset)} cover global batch sizes {sizes}, not "
            f"{batch}: run at a batch size they cover, or pass an RCP file with a record for {batch}"
        )
    noncompliant = [r.file for r in runs if r.converged and any(not c.startswith(NOT_CHECKED) for c in r.compliance)]
    if noncompliant:
        which = "every run fails" if len(noncompliant) == len(runs) > 1 else f"{_files(noncompliant)} fail"
        which += "s" if len(noncompliant) == 1 else ""
        messages.append(
            f"{which} MLPerf's compliance checker: MLPerf's result summarizer leaves such runs out of the "
            "time-to-train (as runs that did not converge); the olympic mean here keeps them"
        )
    return RunSetScore(
        folder=str(folder),
        ruleset=ruleset,
        rcp_source=_rcp_source(rcp_path, ruleset),
        benchmark=benchmark,
        global_batch_size=batch,
        runs=tuple(runs),
        olympic_mean_minutes=mean_minutes,
        olympic_mean_to_converge=mean_counted,
        rcp=verdict,
        required_runs=required,
        messages=tuple(messages),
        compliance_checked=compliance,
    )


def _rcp_source(rcp_path: Path | None, ruleset: str) -> str:
    return str(rcp_path) if rcp_path else f"mlperf-logging {USAGE}_{ruleset} packaged RCPs"


def _stage_run(
    path: Path,
    parsed: ParsedLog,
    copy: Path,
    ruleset: str,
    train_samples: bool,
    compliance: bool,
    rcp_checker: Any,
) -> RunFacts:
    """Write what the checker may read of `path` to `copy` and read it back the checker's way.

    A file with unreadable lines is staged as a stand-in holding only its benchmark and batch
    size, which the checker counts as a run that did not converge.
    """
    problems = [*parsed.problems, *_one_run_problems(parsed), *_timing_problems(parsed)]
    if problems:
        problems[-1] += "; the file is not accepted and counts as a run that did not converge"
    _write_stage(copy, parsed, stand_in=bool(problems))
    view = None
    with captured_checker_logs():
        try:
            view = rcp_checker.read_submission_file(str(copy), ruleset, train_samples)
        except Exception as exc:
            problems.append(
                f"MLPerf's RCP checker cannot read it ({type(exc).__name__}: {exc}); counted as not converged"
            )
            _write_stage(copy, parsed, stand_in=True)
        else:
            if not view[0] and _numeric_value(view[1]) is None:
                problems.append(f"its count to converge is {view[1]!r}, not a finite number; counted as not converged")
                _write_stage(copy, parsed, stand_in=True)
    notes: tuple[str, ...] = ()
    if compliance and problems:
        notes = (f"{NOT_CHECKED}: the file is not accepted (see its problems)",)
    elif compliance:
        benchmark = parsed.first("submission_benchmark")
        notes = (
            compliance_messages(path, ruleset)
            if benchmark and benchmark.value
            else (
                f"{NOT_CHECKED}: the compliance rules are chosen by the submission_benchmark line, which names no "
                "benchmark here",
            )
        )
    return run_facts(path, parsed, view, problems, notes, ruleset)


def _one_run_problems(parsed: ParsedLog) -> list[str]:
    """A result file is one run of one benchmark: two submission_benchmark values or two run_start
    lines are logs run together (the RCP checker would read one run's figures under the other's name)."""
    problems = []
    benchmarks: dict[str, int] = {}
    for line in parsed.lines:
        if line.key == "submission_benchmark":
            benchmarks.setdefault(json.dumps(line.value), line.lineno)
    if len(benchmarks) > 1:
        listed = ", ".join(f"{json.loads(v)!r} at line {n}" for v, n in benchmarks.items())
        problems.append(f"holds runs of {len(benchmarks)} benchmarks ({listed}): one run per result file")
    starts = [line.lineno for line in parsed.lines if line.key == "run_start"]
    if len(starts) > 1:
        problems.append(
            f"holds {len(starts)} run_start lines (lines {', '.join(map(str, starts))}): one run per result file"
        )
    return problems


def _timing_problems(parsed: ParsedLog) -> list[str]:
    """A run that stopped has a time to train: a run_start before its run_stop. (The RCP checker
    reads no timestamps, so without this such a run would converge with no minutes to average.)"""
    start, stop = parsed.first("run_start"), parsed.first("run_stop")
    if stop is None or not parsed.lines:
        return []
    if start is None:
        return [f"line {stop.lineno}: run_stop without a run_start: no time to train"]
    if stop.time_ms < start.time_ms:
        return [
            f"line {stop.lineno}: run_stop (time_ms {stop.time_ms:.0f}) precedes run_start (time_ms {start.time_ms:.0f})"
        ]
    return []


def _write_stage(copy: Path, parsed: ParsedLog, stand_in: bool) -> None:
    """What the RCP checker reads of a run; a stand-in holds only the first benchmark and batch lines."""
    lines = list(parsed.lines)
    if stand_in:
        lines = [line for line in (parsed.first(key) for key in _STAND_IN_KEYS) if line is not None]
        lines.sort(key=lambda line: line.lineno)
    copy.write_text("".join(line.text + "\n" for line in lines), encoding="latin-1")


def _set_identity(runs: Sequence[RunFacts]) -> tuple[str | None, Any, list[str]]:
    """The set's benchmark and batch size, or messages naming the files that disagree."""
    blockers = []
    identity = {}
    for label, key in (("submission_benchmark", "benchmark"), ("global_batch_size", "global_batch_size")):
        values: dict[str, list[str]] = {}
        for run in runs:
            values.setdefault(json.dumps(getattr(run, key)), []).append(run.file)
        missing = values.pop("null", [])
        if missing:
            blockers.append(f"no {label} line in {_files(missing)}")
        if len(values) > 1:
            listed = "; ".join(f"{json.loads(v)!r} in {_files(f)}" for v, f in values.items())
            blockers.append(f"{label} differs between files: {listed}")
        identity[key] = json.loads(next(iter(values))) if len(values) == 1 else None
    benchmark, batch = identity["benchmark"], identity["global_batch_size"]
    if benchmark is not None and not isinstance(benchmark, str):
        blockers.append(f"submission_benchmark must name a benchmark, found {benchmark!r}")
        benchmark = None
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        blockers.append(f"global_batch_size must be a whole number of samples, found {batch!r}")
        batch = None
    return benchmark, batch, blockers


def _runs(count: int) -> str:
    """'1 run', '5 runs'."""
    return f"{count} run{'' if count == 1 else 's'}"


def _files(names: Sequence[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _checker_blockers(
    benchmark: str | None,
    ruleset: str,
    rcp_data: dict[str, Any] | None,
    rcp_path: Path | None,
    runs: Sequence[RunFacts],
    rcp_checker: Any,
) -> list[str]:
    """Reasons the checker cannot give a verdict (where it would raise or divide by nothing)."""
    if benchmark is None:
        return []
    blockers = []
    if len(runs) < 3:
        blockers.append(f"olympic scoring needs at least 3 runs, found {_runs(len(runs))}")
    table = rcp_checker.submission_runs.get(USAGE, {})
    if benchmark not in table:
        blockers.append(
            f"benchmark {benchmark!r} is not one mlperf-logging's RCP checker knows ({', '.join(sorted(table))})"
        )
    elif rcp_data is None:
        packaged = Path(rcp_checker.__file__).parent / f"{USAGE}_{ruleset}" / f"rcps_{benchmark}.json"
        if not packaged.is_file():  # in no ruleset: require_packaged_rcps has named any that has them
            blockers.append(f"mlperf-logging has no RCPs for {benchmark} in any ruleset; pass an RCP file for it")
        elif any(r.rocm_validate_benchmark for r in runs):
            marker = next(r.rocm_validate_benchmark for r in runs if r.rocm_validate_benchmark)
            blockers.append(
                f"these runs are rocm-validate's {marker}, not MLPerf {benchmark}: score them against the RCP file "
                "the convergence suite recorded (--rcp <baselines>/rcps/<device-key>.json)"
            )
    else:
        others = sorted({str(r.get("Benchmark")) for r in rcp_data.values()} - {benchmark})
        if others:
            blockers.append(f"the RCP file {rcp_path} holds RCPs for {', '.join(others)}, not {benchmark}")
    return blockers


def _run_checker(
    staged: Path, ruleset: str, train_samples: bool, rcp_path: Path | None, benchmark: str, batch: Any, rcp_checker: Any
) -> RcpVerdict:
    """mlperf-logging's check_directory on the staged copies, with MLPerf's pruned RCPs."""
    with captured_checker_logs() as capture:
        try:
            with _open_rcp(rcp_path) as handle:
                passed, message, factor = rcp_checker.check_directory(
                    str(staged), USAGE, ruleset, False, train_samples, rcp_file=handle, rcp_pass="pruned_rcps"
                )
            with _open_rcp(rcp_path) as handle:
                checker = rcp_checker.RCP_Checker(USAGE, ruleset, benchmark, False, handle)
        except Exception as exc:
            return RcpVerdict(False, f"MLPerf's RCP checker failed: {type(exc).__name__}: {exc}", None)
        record = _compared_record(checker, batch, str(message))
    factor_value = float(factor) if factor is not None and math.isfinite(float(factor)) else None
    sizes = tuple(sorted({r["BS"] for r in getattr(checker, "rcp_data", {}).values()}))
    return RcpVerdict(bool(passed), str(message), factor_value, record, tuple(capture.warnings()), False, sizes)


@contextlib.contextmanager
def _open_rcp(path: Path | None) -> Iterator[Any]:
    """The open file the checker wants for a custom RCP file, or None for its packaged table."""
    if path is None:
        yield None
        return
    with open(path, encoding="utf-8") as handle:
        yield handle


def _compared_record(checker: Any, batch: Any, message: str) -> dict[str, Any] | None:
    """The RCP statistics the verdict rests on (mean, stdev, min acceptable mean, max speedup).

    Read from the checker's own computation; None when the verdict rests on no single record,
    or when this mlperf-logging version arranges its internals differently.
    """
    try:
        if message == "RCP found":
            record = next(r for r in checker.pruned_rcp_data.values() if r["BS"] == batch)
        elif message == "RCP Interpolation":
            low = checker._find_top_min_rcp(batch, "pruned_rcps")
            high = checker._find_bottom_max_rcp(batch, "pruned_rcps")
            record = checker._create_interp_rcp(batch, low, high)[1]
        else:
            return None
        return {
            "batch_size": record["BS"],
            "mean": float(record["RCP Mean"]),
            "stdev": float(record["RCP Stdev"]),
            "min_acceptable_mean": float(record["Min Epochs"]),
            "max_speedup": float(record["Max Speedup"]),
            "interpolated": message == "RCP Interpolation",
        }
    except (AttributeError, KeyError, StopIteration, TypeError):
        return None
