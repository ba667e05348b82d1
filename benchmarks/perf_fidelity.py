"""Fidelity of the perf suite's figures: the suite's GEMM and device-copy throughput against a
raw event-timed loop on the same shapes, in one process, printed as ratios.

The suite's figure comes from the same code the suite runs (rocm_validate.perf.timing with the GPU
plan, operand rotation sized from the device's caches). Two raw loops bracket it: `raw` times N
back-to-back calls on one operand set between two events (the naive figure; its operands may sit
in L2 / Infinity Cache), `raw-rotating` does the same over the suite's rotating sets (so the ratio
to it isolates harness overhead from the cache effect). Each raw figure is the median of five
loops, measured before and after the suite's figure and averaged to cancel clock drift.

    python benchmarks/perf_fidelity.py [--device 0] [--dtypes bf16,fp8] [--out results.json]

Exit status 1 when any suite figure is below --min-ratio (0.97) of the raw loop, the issue's
criterion; suite/raw-rotating then tells harness overhead (low too) from colder operands (near 1).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from rocm_validate.perf.kernels import (
    GEMM_DTYPES,
    gemm_kernel,
    gemm_operands,
    gemm_set_bytes,
)
from rocm_validate.perf.timing import (
    GPU_PLAN,
    DeviceEventClock,
    Rotation,
    TimingPlan,
    cache_defeat_bytes,
    measure,
    rotation_count,
    sustained_changes,
)
from rocm_validate.platform.devices import discover_devices
from rocm_validate.platform.selection import DeviceSelection, select_device
from rocm_validate.results import jsonfile
from rocm_validate.workloads.shapes import GEMM_BENCHMARKS, gemm_flops

COPY_BYTES = 2048 * 1024 * 1024
RESULTS_SCHEMA: dict[str, Any] = {"title": "perf fidelity", "type": "object", "required": ["device", "rows"]}


def raw_rate(fn: Callable[[], Any], seconds: float = 0.1, repeats: int = 5, warmup_s: float = 0.0) -> float:
    """Calls per second of a plain loop: one event before, one after N calls; median of repeats.

    warmup_s: run the loop that long first, as the suite does for power-hungry work.
    """
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    started = time.perf_counter()
    while time.perf_counter() - started < warmup_s:
        for _ in range(10):
            fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    calls = max(1, int(seconds / (start.elapsed_time(end) / 1000.0)))
    rates = []
    for _ in range(repeats):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        rates.append(calls / (start.elapsed_time(end) / 1000.0))
    return statistics.median(rates)


def compare(
    label: str,
    work: float,
    unit_scale: float,
    suite_fn: Callable[[], Any],
    warm_fn: Callable[[], Any],
    plan: TimingPlan,
) -> dict[str, Any]:
    """One row: raw loops before and after the suite's measurement (under the suite's plan), and
    the ratios. Raw loops warm up as long as the plan does, so both see the same clock regime."""
    warmup = plan.warmup_min_s
    before_warm, before_cold = raw_rate(warm_fn, warmup_s=warmup), raw_rate(suite_fn, warmup_s=warmup)
    suite = measure(suite_fn, plan, DeviceEventClock(torch)).rate(1.0)
    after_warm, after_cold = raw_rate(warm_fn, warmup_s=warmup), raw_rate(suite_fn, warmup_s=warmup)
    warm, cold = (before_warm + after_warm) / 2, (before_cold + after_cold) / 2
    row = {
        "case": label,
        "suite": suite * work / unit_scale,
        "raw": warm * work / unit_scale,
        "raw_rotating": cold * work / unit_scale,
        "ratio_to_raw": suite / warm,
        "ratio_to_raw_rotating": suite / cold,
    }
    print(
        f"{label:44s} suite {row['suite']:10.1f}  raw {row['raw']:10.1f}  raw-rotating {row['raw_rotating']:10.1f}"
        f"  suite/raw {row['ratio_to_raw']:.3f}  suite/raw-rotating {row['ratio_to_raw_rotating']:.3f}",
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--dtypes", default=",".join(GEMM_DTYPES))
    parser.add_argument("--min-ratio", type=float, default=0.97)
    parser.add_argument("--out", help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    try:
        device = select_device(discover_devices(), DeviceSelection.parse(str(args.device), "--device"))
    except LookupError as exc:
        print(f"perf_fidelity: needs a GPU: {exc}", file=sys.stderr)
        return 2
    torch.cuda.set_device(device.index)
    torch.set_float32_matmul_precision("highest")
    target = torch.device(device.torch_device)
    defeat = cache_defeat_bytes(device.l2_cache_bytes, device.last_level_cache_bytes)
    gemm_plan = replace(GPU_PLAN, **sustained_changes(device.backend))  # as suites/perf/test_gemm.py
    started = time.perf_counter()
    rows = []
    print(f"{device.name} ({device.device_key}); TFLOP/s for GEMMs, GB/s for the copy", flush=True)
    for dtype in args.dtypes.split(","):
        if dtype == "fp8" and not (device.scaled_mm and device.fp8_formats):
            continue
        fp8_format = device.fp8_formats[0] if dtype == "fp8" else None
        for case in GEMM_BENCHMARKS:
            m, n, k = case.shape("full")
            count = rotation_count(gemm_set_bytes(dtype, m, n, k), defeat)
            rotation = Rotation([gemm_operands(dtype, m, n, k, target, fp8_format) for _ in range(count)])
            kernel = gemm_kernel(dtype, target)
            first = rotation.sets[0]
            rows.append(
                compare(
                    f"gemm.{dtype}.{m}x{n}x{k}",
                    gemm_flops(m, n, k),
                    1e12,
                    lambda kernel=kernel, rotation=rotation: kernel(*rotation.next()),
                    lambda kernel=kernel, first=first: kernel(*first),
                    gemm_plan,
                )
            )
            rotation = first = None  # free this shape's operands before the next one
            torch.cuda.empty_cache()
    source = torch.empty(COPY_BYTES, dtype=torch.uint8, device=target).random_(0, 256)
    copy_target = torch.empty_like(source)

    def copy() -> Any:
        return copy_target.copy_(source)

    rows.append(compare(f"copy.device.{COPY_BYTES >> 20}mib", 2.0 * COPY_BYTES, 1e9, copy, copy, GPU_PLAN))
    worst = min(rows, key=lambda r: r["ratio_to_raw"])
    print(f"worst suite/raw: {worst['case']} {worst['ratio_to_raw']:.3f}; {time.perf_counter() - started:.0f} s")
    if args.out:
        results = {"device": device.to_dict(), "torch": torch.__version__, "min_ratio": args.min_ratio, "rows": rows}
        jsonfile.write_json(Path(args.out), results, RESULTS_SCHEMA)
    return 0 if worst["ratio_to_raw"] >= args.min_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
