"""What the correctness suite can see: the smallest systematic change of an op's output that fails
its check, per op and dtype, and the coefficient of the error model each healthy check needed.

    python benchmarks/numerics_detection.py detect [--device cpu|cuda] [--out detection.json]
    python benchmarks/numerics_detection.py needs [--device cpu|cuda] [--out needs.json]

`detect` plants a relative scale 1 + s on each building block's output and on the GEMM of
`F.linear`, computed the way a broken kernel would (in float32, scaled, rounded once to the
dtype: scaling an already rounded bf16 value by 1.001 changes nothing), and finds the smallest s
on a grid from 1e-6 to 1e-2 at which the check fails. `needs` runs every healthy block and reports,
for each output and gradient, the smallest accumulation coefficient (float32 ulps x sqrt(K) of
the element's magnitude) and, in bf16 / fp16, the smallest spread (ulps of the dtype x the
magnitude) that would have passed: the numbers the tolerance table's block rows are set from
(docs/correctness.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rocm_validate.correctness import blocks
from rocm_validate.correctness.compare import Comparison
from rocm_validate.correctness.error_model import growth, underflow, unit_roundoff
from rocm_validate.correctness.gemm import check_linear
from rocm_validate.platform.devices import DeviceInfo, discover_cpu, discover_gpus
from rocm_validate.workloads.shapes import gemm_dtypes, gemm_problem

SCALES = (1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2)


def _device(kind: str) -> tuple[DeviceInfo, torch.device]:
    if kind == "cuda":
        return discover_gpus(torch, os.environ)[0], torch.device("cuda:0")
    return discover_cpu(torch, os.environ), torch.device("cpu")


def _scaled_block(block: blocks.Block, factor: float) -> blocks.Block:
    def wrong(tensors: blocks.Tensors, extra: dict[str, Any]) -> torch.Tensor:
        healthy = block.candidate(tensors, extra)
        upcast = {k: t.float() if t.is_floating_point() else t for k, t in tensors.items()}
        return (block.candidate(upcast, extra) * factor).to(healthy.dtype)

    return dataclasses.replace(block, candidate=wrong)


def _smallest_failing(run: Callable[[float], list[Comparison]]) -> dict[str, Any]:
    """The smallest planted scale on SCALES whose checks fail (grid search from the top down,
    stopping at the first scale that passes), with how the failure was seen."""
    found: dict[str, Any] = {"fails_at": None, "seen_by": None}
    for scale in reversed(SCALES):
        failed = [c for c in run(scale) if not c.passed]
        if not failed:
            break
        judged = failed[0].model
        seen = "lean" if judged is not None and judged.mismatches == 0 and not failed[0].lean_ok else "elements"
        found = {"fails_at": scale, "seen_by": seen if judged is not None else "exact"}
    return found


def detect(device: DeviceInfo, target: torch.device) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for block in list(blocks.BLOCKS.values()):
        for name, model, dtype in blocks.block_ids(block, device.is_gpu):
            if not device.is_gpu and dtype in ("bfloat16", "float16") and not block.cpu_low_precision_grads:
                continue

            def run(scale: float, name: str = name, model: str | None = model, dtype: str = dtype) -> list[Comparison]:
                original = blocks.BLOCKS[name]
                blocks.BLOCKS[name] = _scaled_block(original, 1 + scale)
                try:
                    return blocks.check_block(name, model, dtype, device, target)
                finally:
                    blocks.BLOCKS[name] = original

            key = f"block.{name} {model or 'any'} {dtype}"
            rows[key] = _smallest_failing(run)
            print(f"{key:50} {rows[key]}", flush=True)
    problem = gemm_problem("llama-3.1-8b.down", device.is_gpu)
    for dtype in gemm_dtypes(device.backend):

        def run_gemm(scale: float, dtype: str = dtype) -> list[Comparison]:
            original = torch.nn.functional.linear

            def wrong(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
                out = original(x.float(), w.float(), None if b is None else b.float())
                return (out * (1 + scale)).to(x.dtype)

            torch.nn.functional.linear = wrong
            try:
                return [check_linear(problem, dtype, device, target)]
            finally:
                torch.nn.functional.linear = original

        key = f"gemm {problem.name} {dtype}"
        rows[key] = _smallest_failing(run_gemm)
        print(f"{key:50} {rows[key]}", flush=True)
    return rows


def needs(device: DeviceInfo, target: torch.device) -> dict[str, dict[str, float]]:
    """Per block check: the smallest float32 accumulation coefficient (fp32 cases) and bf16 /
    fp16 spread (low-precision cases) its healthy results needed, with rounding 2 (outputs) or 4
    (gradients), the worst over every case."""
    rows: dict[str, dict[str, float]] = {}
    for block in blocks.BLOCKS.values():
        for name, model, dtype in blocks.block_ids(block, device.is_gpu):
            if not device.is_gpu and dtype in ("bfloat16", "float16") and not block.cpu_low_precision_grads:
                continue
            shape = blocks.block_shape(model or blocks.BLOCK_MODELS[0], device.is_gpu)
            found, expected, sizes, _ = blocks.run_block(block, shape, dtype, target)
            for part, gold in expected.items():
                kind = "out" if part == "out" else "grad"
                precision = str(found[part].dtype).removeprefix("torch.")
                terms = block.terms(shape) if kind == "out" else block.grad_terms(shape)
                c, g = found[part].double(), gold.double()
                m = sizes.get(part)
                m = torch.full_like(g, float(g.abs().max())) if m is None else m.double().expand_as(g)
                rounding = 2.0 if kind == "out" else 4.0
                excess = ((c - g).abs() - unit_roundoff(precision) * rounding * g.abs() - underflow(precision)).clamp(
                    min=0
                )
                usable = torch.isfinite(g) & (m > 0)
                acc = excess / (unit_roundoff("float32") * growth("sqrt", terms) * m)
                spread = excess / (unit_roundoff(precision) * m)
                row = rows.setdefault(f"block.{name}.{kind}", {"float32_accumulation": 0.0, "low_spread": 0.0})
                if precision == "float32":
                    row["float32_accumulation"] = max(row["float32_accumulation"], float(acc.where(usable, 0).max()))
                else:
                    row["low_spread"] = max(row["low_spread"], float(spread.where(usable, 0).max()))
    for key, row in rows.items():
        print(
            f"{key:32} float32 accumulation {row['float32_accumulation']:9.3g}   bf16/fp16 spread {row['low_spread']:9.3g}"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("detect", "needs"))
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    device, target = _device(args.device)
    rows = detect(device, target) if args.mode == "detect" else needs(device, target)
    if args.out:
        described = {"name": device.name, "arch": device.arch, "torch": torch.__version__}
        args.out.write_text(json.dumps({"device": described, args.mode: rows}, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
