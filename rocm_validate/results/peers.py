"""Peer comparison: a verdict with no history.

Every GPU of a node that shares a SKU should measure alike. For each metric measured on two or
more GPUs of the same device key, each GPU is compared with the median of the others (its peers),
and flagged when it is worse by more than a band derived from the measurements' own noise, the
same band the baseline gate allows (the perf suite supplies it through the
`pytest_rocm_noise_band` hook; this module only takes it as a function). No baseline is needed,
and a flag points at one GPU's hardware rather than the software stack every GPU shares: "GPU 5
(BDF 0000:c1:00.0) is 12.0% below the median of its 7 peers on gemm.bf16.8192x8192x8192".

The same comparison names the slow pair among peer-to-peer copies (subjects 'GPU 2 -> GPU 5').
Pure: facts in, findings out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rocm_validate.results.metrics import GpuRef, Metric, Verdict, format_number
from rocm_validate.results.triage import PeerFlag

# (own relative spread, a typical peer's relative spread) -> (allowed fraction, how it was
# derived), or None when the metric is not compared (informational).
Band = Callable[[float | None, float | None], "tuple[float, str] | None"]


@dataclass(frozen=True)
class PeerSample:
    """One subject's measurement of a metric: a GPU, or a GPU pair."""

    subject: str
    value: float
    dispersion: float | None = None  # relative spread (IQR / median) of its samples, if measured
    gpu: GpuRef | None = None


@dataclass(frozen=True)
class PeerFinding:
    """One subject against the median of its peers."""

    name: str
    subject: str
    value: float
    unit: str
    better: str
    median: float
    peers: int
    ratio: float  # value / median of the peers
    allowed: float | None
    verdict: Verdict  # pass or below-peers (worse than the peers beyond the band)
    message: str = ""
    gpu: GpuRef | None = None

    @property
    def flagged(self) -> bool:
        return self.verdict == Verdict.BELOW_PEERS

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("better", "unit"):
            data.pop(key)
        return data


def _peer_count(count: int) -> str:
    return "its peer" if count == 1 else f"its {count} peers"


class _LeaveOneOut:
    """The median of a list with one element left out, for every element, in O(n log n) overall:
    sorted once, then each median read off by position (a fleet compares 1,000 nodes a metric)."""

    def __init__(self, values: Sequence[float]) -> None:
        order = sorted(range(len(values)), key=values.__getitem__)
        self.sorted = [values[i] for i in order]
        self.position = {index: rank for rank, index in enumerate(order)}

    def median_without(self, index: int | None) -> float | None:
        """The median without element `index` (None: of them all); None when nothing is left."""
        skip = self.position.get(index) if index is not None else None
        count = len(self.sorted) - (skip is not None)
        if count < 1:
            return None

        def at(rank: int) -> float:
            return self.sorted[rank + 1 if skip is not None and rank >= skip else rank]

        middle = count // 2
        return at(middle) if count % 2 else (at(middle - 1) + at(middle)) / 2


def compare(name: str, unit: str, better: str, samples: Sequence[PeerSample], band: Band) -> list[PeerFinding]:
    """Each sample against the median of the others (leave one out, so with two subjects only
    the worse one can be flagged). Samples that are not positive finite numbers are left out;
    fewer than two usable samples give no findings."""
    usable = [s for s in samples if isinstance(s.value, (int, float)) and math.isfinite(s.value) and s.value > 0]
    if len(usable) < 2:
        return []
    values = _LeaveOneOut([s.value for s in usable])
    with_spread = [i for i, s in enumerate(usable) if s.dispersion is not None]
    spreads = _LeaveOneOut([float(usable[i].dispersion or 0.0) for i in with_spread])
    spread_index = {sample_index: k for k, sample_index in enumerate(with_spread)}
    findings = []
    for index, sample in enumerate(usable):
        median = values.median_without(index)
        assert median is not None  # two or more usable samples
        judged = band(sample.dispersion, spreads.median_without(spread_index.get(index)))
        if judged is None:
            continue
        allowed, description = judged
        others = len(usable) - 1
        ratio = sample.value / median
        worse = ratio < 1 - allowed if better == "higher" else ratio > 1 + allowed
        message = ""
        if worse:
            direction = "below" if better == "higher" else "above"
            lower = "" if better == "higher" else " (lower is better)"
            message = (
                f"{sample.subject} is {abs(ratio - 1):.1%} {direction} the median of {_peer_count(others)} "
                f"on {name}{lower}: {format_number(sample.value)} vs {format_number(median)} {unit} "
                f"(allowed {description})"
            )
        findings.append(
            PeerFinding(
                name,
                sample.subject,
                sample.value,
                unit,
                better,
                median,
                others,
                ratio,
                allowed,
                Verdict.BELOW_PEERS if worse else Verdict.PASS,
                message,
                sample.gpu,
            )
        )
    return findings


def gpu_findings(metrics: Iterable[Metric], band_for: Callable[[Metric], Band]) -> list[PeerFinding]:
    """Peer findings for every metric measured on two or more GPUs of one device key.

    Metrics without a GPU (single-device runs, node-wide collectives) and invalid measurements
    are not compared; `band_for(metric)` gives the band for that metric's name and backend."""
    groups: dict[tuple[str, str, str, str], list[Metric]] = {}
    for metric in metrics:
        if metric.gpu is None or metric.verdict == Verdict.INVALID:
            continue
        key = (metric.name, metric.gpu.device_key or "", metric.unit, metric.better)
        groups.setdefault(key, []).append(metric)
    findings = []
    for (name, _, unit, better), group in sorted(groups.items()):
        if len({m.gpu.index for m in group if m.gpu is not None}) < 2:
            continue
        samples = [PeerSample(m.gpu.label, m.value, m.dispersion, m.gpu) for m in group if m.gpu is not None]
        findings.extend(compare(name, unit, better, samples, band_for(group[0])))
    return findings


def peer_flags(findings: Iterable[PeerFinding]) -> tuple[PeerFlag, ...]:
    """The flagged findings, one per subject, with how much worse it is on each metric (the verdict's words)."""
    shortfalls: dict[str, list[float]] = {}
    for finding in findings:
        if finding.flagged:
            worse = 1 - finding.ratio if finding.better == "higher" else finding.ratio - 1
            shortfalls.setdefault(finding.subject, []).append(worse)
    return tuple(PeerFlag(subject, tuple(values)) for subject, values in sorted(shortfalls.items()))
