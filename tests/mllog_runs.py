"""Build MLPerf result files for tests with mlperf-logging's own `mllog` writer (MLLogger).

`write_run` writes one BERT-style result_<n>.txt: the submission keys, a few evaluations whose
`epoch_num` counts samples (as MLPerf BERT logs them), `train_samples`, and a run_stop.
`write_llama31_8b_run` writes a Llama 3.1 8B pretraining log as AMD's MLPerf Training v5.1
submission logs it: every key the closed 5.1.0 compliance rules ask for, evaluations of log
perplexity whose `epoch_num` and `samples_count` both count samples, block / eval intervals
counted in samples, and `train_samples` (the samples trained) after run_stop.
Timestamps are given, so minutes-to-train are exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mlperf_logging.mllog import constants

from rocm_validate.convergence.mlperf import mllog_writer

START_MS = 1_700_000_000_000


def write_run(
    path: Path,
    samples: int,
    minutes: float = 10.0,
    batch: Any = 256,
    benchmark: str = "bert",
    status: str | None = "success",
    accuracy: float = 0.721,
    extra: Sequence[tuple[str, Any]] = (),
    train_samples: int | None = None,
) -> Path:
    """One run that reaches `accuracy` after `samples` samples in `minutes` (status None: no run_stop);
    `train_samples` is logged as trained (default: `samples`)."""
    with mllog_writer(path) as log:
        at = START_MS
        log.event(constants.CACHE_CLEAR, True, time_ms=at)
        log.start(constants.INIT_START, time_ms=at)
        log.event(constants.SUBMISSION_BENCHMARK, benchmark, time_ms=at)
        log.event(constants.SUBMISSION_DIVISION, "closed", time_ms=at)
        log.event(constants.GLOBAL_BATCH_SIZE, batch, time_ms=at)
        for key, value in extra:
            log.event(key, value, time_ms=at)
        log.end(constants.INIT_STOP, time_ms=at + 1000)
        start = at + 2000
        log.start(constants.RUN_START, time_ms=start)
        stop = start + int(minutes * 60_000)
        for fraction in (0.5, 0.8, 1.0):
            seen = int(samples * fraction)
            when = start + int((stop - start) * fraction)
            log.event(constants.EVAL_ACCURACY, accuracy * fraction, metadata={"epoch_num": seen}, time_ms=when)
        log.event(constants.TRAIN_SAMPLES, samples if train_samples is None else train_samples, time_ms=stop)
        if status is not None:
            log.end(constants.RUN_STOP, metadata={"status": status}, time_ms=stop)
    return path


# closed-division hyperparameters of llama31_8b at BS 32 (mlperf-logging's 5.1.0 RCP llama31_8b_ref_32)
LLAMA31_8B_KEYS: tuple[tuple[str, Any], ...] = (
    ("max_sequence_length", 8192),
    ("opt_name", "adamw"),
    ("opt_base_learning_rate", 0.0008),
    ("opt_end_learning_rate", 8e-06),
    ("opt_learning_rate_warmup_steps", 128),
    ("opt_learning_rate_decay_steps", 1_200_000 - 128),
    ("opt_learning_rate_decay_schedule", "cosine with linear warmup"),
    ("opt_adamw_beta_1", 0.9),
    ("opt_adamw_beta_2", 0.95),
    ("opt_adamw_epsilon", 1e-05),
    ("opt_adamw_weight_decay", 0.1),
    ("opt_gradient_clip_norm", 1.0),
    ("gradient_accumulation_steps", 1),
    ("eval_samples", 1024),
    ("max_steps", 1_200_000),
)


def write_llama31_8b_run(
    path: Path,
    samples: int,
    minutes: float = 95.9,
    batch: Any = 32,
    status: str | None = "success",
    log_perplexity: float = 3.29,
    division: str = "closed",
    platform: str = "MI355X",
    hyperparameters: dict[str, Any] | None = None,
) -> Path:
    """One llama31_8b run that reaches `log_perplexity` after `samples` samples in `minutes`
    (status None: no run_stop); earlier evaluations are worse (higher). `hyperparameters`
    replace entries of LLAMA31_8B_KEYS."""
    with mllog_writer(path) as log:
        at = START_MS
        log.event(constants.CACHE_CLEAR, True, time_ms=at)
        log.start(constants.INIT_START, time_ms=at)
        for key, value in (
            (constants.SUBMISSION_BENCHMARK, "llama31_8b"),
            (constants.SUBMISSION_DIVISION, division),
            (constants.SUBMISSION_STATUS, "onprem"),
            (constants.SUBMISSION_ORG, "AMD"),
            (constants.SUBMISSION_PLATFORM, platform),
            (constants.GLOBAL_BATCH_SIZE, batch),
            ("seed", 1234),
            *{**dict(LLAMA31_8B_KEYS), **(hyperparameters or {})}.items(),
        ):
            log.event(key, value, time_ms=at)
        log.end(constants.INIT_STOP, time_ms=at + 60_000)
        start = at + 60_000
        log.start(constants.RUN_START, time_ms=start)
        stop = start + int(minutes * 60_000)
        seen = 0
        for fraction in (0.5, 0.8, 1.0):
            log.start(constants.BLOCK_START, metadata={"samples_count": seen}, time_ms=start + 1)
            seen = int(samples * fraction)
            when = start + int((stop - start) * fraction)
            log.end(constants.BLOCK_STOP, metadata={"samples_count": seen}, time_ms=when - 2)
            log.start(constants.EVAL_START, metadata={"samples_count": seen}, time_ms=when - 2)
            value = log_perplexity + (1.0 - fraction)
            log.event(constants.EVAL_ACCURACY, value, metadata={"epoch_num": seen, "samples_count": seen}, time_ms=when)
            log.end(constants.EVAL_STOP, metadata={"samples_count": seen}, time_ms=when)
        if status is not None:
            log.end(constants.RUN_STOP, metadata={"samples_count": seen, "status": status}, time_ms=stop)
        log.event(constants.TRAIN_SAMPLES, seen, time_ms=stop)
    return path


def write_set(
    folder: Path,
    samples: Sequence[int],
    minutes: Sequence[float] | None = None,
    writer: Callable[..., Path] = write_run,
    **options: Any,
) -> Path:
    """result_0.txt ... result_<n-1>.txt, one run per entry of `samples`, each by `writer`."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, count in enumerate(samples):
        writer(folder / f"result_{index}.txt", count, minutes[index] if minutes else 10.0 + index, **options)
    return folder


def spread(center: int, count: int = 10, step: int = 10_000) -> list[int]:
    """`count` sample counts around `center`, `step` apart: a run set with a spread."""
    return [center + step * (i - count // 2) for i in range(count)]
