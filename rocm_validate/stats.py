"""Summary statistics of timed rounds: pytest-benchmark's own `Stats`, plus MAD and relative spread.

A round is `calls` back-to-back calls timed together; its sample is the seconds per call.
pytest-benchmark's `Stats` gives min/max/mean/stddev/median/quartiles/outliers/ops exactly as
pytest-benchmark computes them (so the exported JSON means what dashboards expect); this module
adds the median absolute deviation and the relative spreads the gate works with.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Sequence

# IQR of a normal distribution is 1.349 standard deviations; MAD is 0.6745 of one.
_IQR_PER_SD = 1.349
_MAD_PER_SD = 0.6745


@dataclass(frozen=True)
class SampleSummary:
    """Per-call seconds of each measured round, summarized."""

    seconds: tuple[float, ...]  # one sample per round: that round's seconds / calls
    calls: int  # calls per round

    def __post_init__(self) -> None:
        if not self.seconds:
            raise ValueError("a summary needs at least one timed round")
        if self.calls < 1:
            raise ValueError(f"calls per round must be at least 1, found {self.calls}")
        bad = [s for s in self.seconds if not (math.isfinite(s) and s > 0)]
        if bad:
            raise ValueError(f"timed rounds must be positive finite seconds, found {bad[:3]}")

    @property
    def rounds(self) -> int:
        return len(self.seconds)

    @property
    def total_calls(self) -> int:
        return self.rounds * self.calls

    @property
    def total_seconds(self) -> float:
        """The whole measured window: every round's duration added up."""
        return math.fsum(self.seconds) * self.calls

    @property
    def mean(self) -> float:
        """Seconds per call over the window (total time / total calls): what throughput divides by."""
        return self.total_seconds / self.total_calls

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def mad(self) -> float:
        """Median absolute deviation from the median, in seconds per call."""
        centre = self.median
        return statistics.median(abs(s - centre) for s in self.seconds)

    def benchmark_stats(self) -> dict[str, Any]:
        """The `stats` object of a pytest-benchmark JSON entry, computed by pytest-benchmark."""
        from pytest_benchmark.stats import Stats

        stats = Stats()
        for sample in self.seconds:
            stats.update(sample)
        data = stats.as_dict()
        data["iterations"] = self.calls
        return data

    @property
    def iqr(self) -> float:
        if self.rounds < 2:
            return 0.0
        return float(self.benchmark_stats()["iqr"])

    @property
    def dispersion(self) -> float:
        """IQR / median of the rounds: the relative spread stored with a baseline."""
        return self.iqr / self.median

    @property
    def noise(self) -> float:
        """Relative standard deviation of one round, estimated robustly from the IQR."""
        return relative_noise(self.dispersion)


def relative_noise(dispersion: float | None) -> float:
    """Relative standard deviation implied by a relative IQR (0 when unknown)."""
    if dispersion is None or not math.isfinite(dispersion) or dispersion < 0:
        return 0.0
    return dispersion / _IQR_PER_SD


def combined_noise(*noises: float) -> float:
    """Noise of a comparison between independent estimates: root sum of squares."""
    return math.sqrt(math.fsum(n * n for n in noises))


def relative_mad(summary: SampleSummary) -> float:
    """MAD / median, scaled to a standard deviation: a second robust spread reported beside IQR."""
    return summary.mad / _MAD_PER_SD / summary.median


def paired_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> tuple[float, ...]:
    """Round-by-round ratios of two interleaved measurements (drift cancels within a pair)."""
    if len(numerator) != len(denominator) or not numerator:
        raise ValueError(f"paired ratios need equal, non-empty rounds; found {len(numerator)} and {len(denominator)}")
    return tuple(n / d for n, d in zip(numerator, denominator))
