"""The device clock over a measurement window, so a compute-bound figure can be judged per clock
cycle when power management, not software, moved it.

A GPU at its power cap does not run at one clock: an H100 running a bf16 GEMM alternates between
about 1.2 and 1.98 GHz every few milliseconds under the 700 W software power cap, and two runs of
the same stack land on different average clocks. A `ClockSampler` reads the SM (NVIDIA) / GFX
(AMD) clock and the power every few milliseconds on a background thread while the work runs;
`clock_window` turns the readings taken inside a measured window into its mean clock, the mean
clock of each block of rounds (aligned by the device's own round timestamps), and the share of
readings taken at a power or thermal limit. Everything but the thread is a pure function of the
readings, tested with made-up clocks.
"""

from __future__ import annotations

import bisect
import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Readings inside a window needed for its mean clock to mean anything (one every 5 ms: 50 ms).
MIN_READINGS = 10
# Power within this share of the enforced cap counts as capped when the library gives no reasons.
CAP_POWER_SHARE = 0.95
# Slowdown reasons (telemetry.NVML_REASONS names) that mean the board is at a power or thermal limit.
CAP_REASONS = frozenset({"sw-power-cap", "hw-power-brake", "sw-thermal", "hw-thermal"})
SAMPLE_INTERVAL_S = 0.005


def mean_clock_error(sd_mhz: float, mean_mhz: float, readings: int) -> float:
    """Relative standard error of a window's mean clock from its readings' standard deviation
    (readings taken as independent); 0 without readings."""
    return sd_mhz / mean_mhz / math.sqrt(readings) if mean_mhz > 0 and readings else 0.0


@dataclass(frozen=True)
class ClockReading:
    """One reading: host time (time.perf_counter), clock, power and active slowdown reasons."""

    t: float
    clock_mhz: float
    power_w: float | None = None
    reasons: tuple[str, ...] | None = None  # None: the library reports no reasons (amdsmi)


def is_capped(reading: ClockReading, power_cap_w: float | None) -> bool:
    """Whether the board was at a power or thermal limit: by the library's reasons where it gives
    them (NVML), else by power within CAP_POWER_SHARE of the enforced cap (amdsmi)."""
    if reading.reasons is not None:
        return bool(CAP_REASONS.intersection(reading.reasons))
    if reading.power_w is None or not power_cap_w:
        return False
    return reading.power_w >= CAP_POWER_SHARE * power_cap_w


@dataclass(frozen=True)
class ClockWindow:
    """The clock over one measured window."""

    mean_mhz: float
    min_mhz: float
    max_mhz: float
    readings: int
    capped_share: float  # share of readings at a power or thermal limit
    reasons: tuple[str, ...]  # every limit seen
    block_mhz: tuple[float, ...] | None = None  # mean clock of each block of rounds, when alignable
    sd_mhz: float = 0.0  # standard deviation of the readings

    @property
    def mean_error(self) -> float:
        """Relative standard error of the mean clock, readings taken as independent."""
        return mean_clock_error(self.sd_mhz, self.mean_mhz, self.readings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean_mhz": round(self.mean_mhz, 1),
            "min_mhz": round(self.min_mhz, 1),
            "max_mhz": round(self.max_mhz, 1),
            "readings": self.readings,
            "capped_share": round(self.capped_share, 3),
            "reasons": list(self.reasons),
            "sd_mhz": round(self.sd_mhz, 1),
        }


def _mean_between(times: Sequence[float], clocks: Sequence[float], start: float, end: float) -> float | None:
    """Mean clock of the readings in [start, end); the nearest reading when none falls inside."""
    low = bisect.bisect_left(times, start)
    high = bisect.bisect_left(times, end)
    if high > low:
        return math.fsum(clocks[low:high]) / (high - low)
    if not times:
        return None
    nearest = min(range(max(0, low - 1), min(len(times), low + 1)), key=lambda i: abs(times[i] - start))
    return clocks[nearest]


def clock_window(
    readings: Sequence[ClockReading],
    start: float,
    end: float,
    power_cap_w: float | None = None,
    blocks: Sequence[tuple[float, float]] = (),
) -> ClockWindow | None:
    """The clock over the host-time window [start, end], or None with too few readings in it.

    `blocks` are (start, end) offsets in seconds from the window's start (device time: the
    device starts the window's first round when the host marks it, its queue being empty);
    each gets the mean clock of the readings inside it, so per-block throughput can be put per
    clock cycle too.
    """
    inside = sorted((r for r in readings if start <= r.t <= end), key=lambda r: r.t)
    if len(inside) < MIN_READINGS:
        return None
    clocks = [r.clock_mhz for r in inside]
    times = [r.t for r in inside]
    reasons = sorted({reason for r in inside for reason in (r.reasons or ()) if reason in CAP_REASONS})
    block_mhz = tuple(_mean_between(times, clocks, start + a, start + b) for a, b in blocks) if blocks else None
    return ClockWindow(
        mean_mhz=statistics.fmean(clocks),
        min_mhz=min(clocks),
        max_mhz=max(clocks),
        readings=len(inside),
        capped_share=sum(is_capped(r, power_cap_w) for r in inside) / len(inside),
        reasons=tuple(reasons),
        block_mhz=None if block_mhz is None or any(m is None for m in block_mhz) else block_mhz,  # type: ignore[arg-type]
        sd_mhz=statistics.pstdev(clocks),
    )


class ClockSampler:
    """Reads the clock every `interval_s` on a daemon thread between `start()` and `stop()`.

    `read` returns a ClockReading without its time (t=0; the sampler stamps it) or None; a read
    that raises ends sampling quietly (the measurement goes on without clocks).
    """

    def __init__(self, read: Callable[[], ClockReading | None], interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._read = read
        self.interval_s = interval_s
        self.readings: list[ClockReading] = []
        self.error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.perf_counter()
            try:
                reading = self._read()
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"
                return
            if reading is not None:
                self.readings.append(ClockReading(now, reading.clock_mhz, reading.power_w, reading.reasons))
            self._stop.wait(self.interval_s)

    def start(self) -> ClockSampler:
        self._thread = threading.Thread(target=self._run, name="rocm-validate-clock-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[ClockReading]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        return list(self.readings)
