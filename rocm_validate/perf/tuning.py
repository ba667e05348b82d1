"""Tuned against default: the speedup of a TunableOp solution over the default GEMM, measured
interleaved, and the rule that fails a tuned solution slower than the default.

A tuned solution exists to be faster; one that is slower than the library's own choice costs
every job that ships it. Whether it is slower is judged on the paired rounds of one window
(drift cancels within a pair): it fails when the default is faster by more than
max(SLOWER_MIN_BAND, SLOWER_NOISE_MULTIPLE x the spread of the paired ratios).
"""

from __future__ import annotations

from rocm_validate.perf.recorder import Measurement
from rocm_validate.perf.stats import SampleSummary, paired_ratios

# A tuned GEMM within 3% of the default is not called slower: five H100 runs of each GEMM agreed
# within 0.9% (docs/perf.md), and TunableOp times each candidate over a few ms, so near-ties
# between solutions are its normal outcome.
SLOWER_MIN_BAND = 0.03
SLOWER_NOISE_MULTIPLE = 3.0
# At most this many entries of a results file are timed (the largest by FLOPs): each takes a
# window of its own.
TIMED_ENTRIES = 24


def tuned_speedup(tuned: Measurement, default: Measurement) -> tuple[float, float]:
    """How many times faster the tuned call ran than the default, and the spread (IQR / median
    of block means) of their round-by-round ratios."""
    ratios = paired_ratios(default.timing.summary.seconds, tuned.timing.summary.seconds)
    return default.timing.summary.mean / tuned.timing.summary.mean, SampleSummary(ratios, 1).dispersion


def slower_message(label: str, speedup: float, spread: float) -> str | None:
    """Why a tuned solution fails for being slower than the default; None when it is not."""
    allowed = max(SLOWER_MIN_BAND, SLOWER_NOISE_MULTIPLE * spread)
    if speedup >= 1 - allowed:
        return None
    return (
        f"{label}: the tuned solution is slower than the default GEMM: speedup {speedup:.3f}x, {1 - speedup:.1%} "
        f"slower (allowed {allowed:.1%} = max(min band {SLOWER_MIN_BAND:.0%}, {SLOWER_NOISE_MULTIPLE:g} x the paired rounds' spread "
        f"{spread:.2%})); retune the shape or set its solution to Default"
    )
