"""Build MLPerf result files for tests with mlperf-logging's own `mllog` writer (MLLogger).

`write_run` writes one BERT-style result_<n>.txt: the submission keys, a few evaluations whose
`epoch_num` counts samples (as MLPerf BERT logs them), `train_samples`, and a run_stop.
Timestamps are given, so minutes-to-train are exact.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def write_set(folder: Path, samples: Sequence[int], minutes: Sequence[float] | None = None, **options: Any) -> Path:
    """result_0.txt ... result_<n-1>.txt, one run per entry of `samples`."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, count in enumerate(samples):
        write_run(folder / f"result_{index}.txt", count, minutes[index] if minutes else 10.0 + index, **options)
    return folder


def spread(center: int, count: int = 10, step: int = 10_000) -> list[int]:
    """`count` sample counts around `center`, `step` apart: a run set with a spread."""
    return [center + step * (i - count // 2) for i in range(count)]
