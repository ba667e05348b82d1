"""Summary statistics of timed rounds: pytest-benchmark's own `Stats`, plus MAD and relative spread.

A round is `calls` back-to-back calls timed together; its sample is the seconds per call.
pytest-benchmark's `Stats` gives min/max/mean/stddev/median/quartiles/outliers/ops exactly as
pytest-benchmark computes them (so the exported JSON means what dashboards expect); this module
adds the median absolute deviation and the relative spreads the gate works with.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# IQR of a normal distribution is 1.349 standard deviations; MAD is 0.6745 of one.
IQR_PER_SD = 1.349
_MAD_PER_SD = 0.6745
# The window is cut into this many consecutive blocks; their means carry the window's noise.
BLOCKS = 8


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
        return _iqr(self.seconds)

    @property
    def block_means(self) -> tuple[float, ...]:
        """Seconds per call of BLOCKS consecutive groups of rounds (one round each when fewer)."""
        return tuple(math.fsum(self.seconds[cut]) / len(self.seconds[cut]) for cut in block_slices(self.rounds))

    def per_clock_dispersion(self, block_mhz: Sequence[float], sustained: bool) -> float:
        """The dispersion of cycles per call: each block's seconds per call times its mean clock.
        Clock swings that move a compute-bound block's time move its cycles far less, so this is
        the noise of a figure judged per clock cycle (scaled to the window mean when sustained)."""
        blocks = self.block_means
        if len(block_mhz) != len(blocks):
            raise ValueError(f"need one clock per block ({len(blocks)}), found {len(block_mhz)}")
        cycles = [seconds * mhz for seconds, mhz in zip(blocks, block_mhz)]
        spread = _iqr(cycles) / statistics.median(cycles)
        return spread / math.sqrt(len(cycles)) if sustained else spread

    @property
    def dispersion(self) -> float:
        """IQR / median of the block means: the relative spread stored with a baseline.

        The throughput is the window's mean, so its noise is that of sub-window means (batch
        means), not of single rounds: a GPU at its power cap alternates clocks every few
        milliseconds, which spreads single 5 ms rounds by ~20% on an H100 while 50 ms blocks of
        the same window agree closely (docs/perf.md).
        """
        blocks = self.block_means
        return _iqr(blocks) / statistics.median(blocks)

    @property
    def mean_dispersion(self) -> float:
        """The block dispersion scaled to the window mean (divided by the root of the block count):
        for sustained averages whose blocks still see a slow power-cap oscillation: repeated
        1 s windows of a large GEMM agree within about 1% while their 125 ms blocks spread 5-8%
        on an H100 (docs/perf.md), so the block spread itself overstates the window's noise.
        """
        return self.dispersion / math.sqrt(len(self.block_means))

    @property
    def noise(self) -> float:
        """Relative standard deviation of one round, estimated robustly from the IQR."""
        return relative_noise(self.dispersion)


def per_clock_noise_estimate(own_dispersion: float, clock_mean_error: float, block_estimate: float | None) -> float:
    """The dispersion of a figure judged per clock cycle: the smaller of two estimates that each
    bound it, the block-by-block one (block times x block clocks, `SampleSummary.per_clock_dispersion`)
    and the figure's own dispersion plus the relative standard error of the window's mean clock."""
    around_mean = math.hypot(own_dispersion, IQR_PER_SD * clock_mean_error)
    return around_mean if block_estimate is None else min(block_estimate, around_mean)


def block_slices(rounds: int) -> list[slice]:
    """The rounds of each of BLOCKS consecutive blocks (one round a block when fewer rounds)."""
    count = min(BLOCKS, rounds)
    size = rounds // count
    return [slice(i * size, (i + 1) * size) for i in range(count - 1)] + [slice((count - 1) * size, rounds)]


def _iqr(values: Sequence[float]) -> float:
    """Interquartile range as pytest-benchmark computes it (0 for a single value)."""
    if len(values) < 2:
        return 0.0
    from pytest_benchmark.stats import Stats

    stats = Stats()
    for value in values:
        stats.update(value)
    return float(stats.iqr)


def relative_noise(dispersion: float | None) -> float:
    """Relative standard deviation implied by a relative IQR (0 when unknown)."""
    if dispersion is None or not math.isfinite(dispersion) or dispersion < 0:
        return 0.0
    return dispersion / IQR_PER_SD


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
