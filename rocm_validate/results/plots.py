"""Plots for pytest-html's report: each GPU's metrics as a ratio to their baseline and to the
median of their peers, and each collective's bus bandwidth against message size.

The series are pure functions of the metrics (tested without matplotlib); drawing needs
matplotlib, an optional extra (`pip install -e ".[html]"`), imported only here and only when a
report is drawn.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Sequence
from typing import Any

from rocm_validate.results.metrics import Metric
from rocm_validate.results.peers import PeerFinding

INSTALL = "pip install -e '.[html]' (pytest-html and matplotlib)"
# Extra keys a collectives bandwidth metric carries (collectives/outcome.py writes them).
COLLECTIVE_KEY, BYTES_KEY = "collective", "bytes"


def ratio_series(
    metrics: Iterable[Metric], peers: Sequence[PeerFinding]
) -> dict[str, dict[int, tuple[float | None, float | None]]]:
    """{metric name: {GPU index: (ratio to baseline, ratio to the peer median)}} for per-GPU metrics."""
    peer_of = {(f.name, f.gpu.index): f.ratio for f in peers if f.gpu is not None}
    series: dict[str, dict[int, tuple[float | None, float | None]]] = {}
    for metric in metrics:
        if metric.gpu is None:
            continue
        series.setdefault(metric.name, {})[metric.gpu.index] = (
            metric.ratio,
            peer_of.get((metric.name, metric.gpu.index)),
        )
    return series


def busbw_series(metrics: Iterable[Metric]) -> dict[str, list[tuple[int, float]]]:
    """{collective: [(message bytes, bus bandwidth), ...] by size} for the collectives' metrics."""
    series: dict[str, list[tuple[int, float]]] = {}
    for metric in metrics:
        op, size = metric.extra.get(COLLECTIVE_KEY), metric.extra.get(BYTES_KEY)
        if op and size:
            series.setdefault(str(op), []).append((int(size), metric.value))
    return {op: sorted(points) for op, points in sorted(series.items())}


def render(metrics: Sequence[Metric], peers: Sequence[PeerFinding]) -> list[tuple[str, str]] | None:
    """(title, base64 PNG) per plot that has data; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        return None
    ratios = ratio_series(metrics, peers)
    images = []
    for position, title in ((0, "Ratio to baseline, per GPU"), (1, "Ratio to the median of its peers, per GPU")):
        bars: dict[str, dict[int, float]] = {
            name: {gpu: ratio for gpu, pair in by_gpu.items() if (ratio := pair[position]) is not None}
            for name, by_gpu in ratios.items()
        }
        bars = {name: values for name, values in bars.items() if values}
        if bars:
            images.append((title, _png(pyplot, _grouped_bars(pyplot, bars, title))))
    lines = busbw_series(metrics)
    if lines:
        images.append(("Bus bandwidth against message size", _png(pyplot, _bandwidth_lines(pyplot, lines))))
    return images


def _grouped_bars(pyplot: Any, bars: dict[str, dict[int, float]], title: str) -> Any:
    figure, axes = pyplot.subplots(figsize=(max(6.0, 0.6 * len(bars) * max(len(v) for v in bars.values()) / 2), 4))
    gpus = sorted({gpu for values in bars.values() for gpu in values})
    width = 0.8 / len(gpus)
    for offset, gpu in enumerate(gpus):
        xs = [i + offset * width for i, values in enumerate(bars.values()) if gpu in values]
        ys = [values[gpu] for values in bars.values() if gpu in values]
        axes.bar(xs, ys, width, label=f"GPU {gpu}")
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(bars))], list(bars), rotation=60, ha="right", fontsize=7)
    axes.set_ylabel("ratio")
    axes.set_title(title)
    axes.legend(fontsize=7, ncol=4)
    return figure


def _bandwidth_lines(pyplot: Any, lines: dict[str, list[tuple[int, float]]]) -> Any:
    figure, axes = pyplot.subplots(figsize=(6, 4))
    for op, points in lines.items():
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=op)
    axes.set_xscale("log", base=2)
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("bus bandwidth (GB/s)")
    axes.legend(fontsize=7)
    return figure


def _png(pyplot: Any, figure: Any) -> str:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=90)
    pyplot.close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
