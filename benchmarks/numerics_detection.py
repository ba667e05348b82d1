"""What the correctness suite can see: the smallest systematic change of an op's output that fails
its check, per op and dtype, and the coefficient of the error model each healthy check needed.

    python benchmarks/numerics_detection.py detect [--device cpu|cuda] [--out detection.json]
    python benchmarks/numerics_detection.py needs [--device cpu|cuda] [--out needs.json]
    python benchmarks/numerics_detection.py precision [--device cpu|cuda] [--out precision.json]

`detect` plants a relative scale 1 + s on each building block's output and on the GEMM of
`F.linear`, computed the way a broken kernel would (in float32, scaled, rounded once to the
dtype: scaling an already rounded bf16 value by 1.001 changes nothing), and finds the smallest s
on a grid from 1e-6 to 1e-2 at which the check fails. `needs` runs every healthy block and reports,
for each output and gradient, the smallest accumulation coefficient (float32 ulps x sqrt(K) of
the element's magnitude) and, in bf16 / fp16, the smallest spread (ulps of the dtype x the
magnitude) that would have passed: the numbers the tolerance table's block rows are set from
(docs/correctness.md). `precision` plants a loss of accuracy instead of a scale: every checked
result's own error against float64 grown by a factor (c' = g + f (c - g), held in float32 and
judged in the result's precision: a kernel with f times the error of this one; f = 2 is one bit), on every building block, the GEMM
and SDPA, and finds the smallest f on a grid from 1.25 to 64 that fails, with the measured growth
of the error norm and the check that saw it.
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

from rocm_validate.correctness import attention, blocks, gemm
from rocm_validate.correctness.attention import check_attention, named_case
from rocm_validate.correctness.compare import Comparison, compare, dtype_name
from rocm_validate.correctness.error_model import growth, underflow, unit_roundoff
from rocm_validate.correctness.gemm import check_linear
from rocm_validate.platform.devices import DeviceInfo, discover_cpu, discover_gpus
from rocm_validate.workloads.shapes import attention_dtypes, gemm_dtypes, gemm_problem

SCALES = (1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2)
GROWTHS = (1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 8.0, 16.0, 64.0)


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


def _grown_compare(factor: float, growths: list[float]) -> Callable[..., Comparison]:
    """`compare` with the candidate's error against the golden grown by `factor` (rounded back to
    its dtype); the error norm's actual growth is appended to `growths`."""

    def grown(check: str, candidate: torch.Tensor, golden: torch.Tensor, *args: Any, **kwargs: Any) -> Comparison:
        g = golden.detach().double()
        c = candidate.detach().to(device=g.device, dtype=torch.float64)
        # held in float32 (judged in the candidate's own precision): rounding the grown result back
        # to bf16 / fp16 would snap most of it back onto the candidate
        kwargs["precision"] = kwargs.get("precision") or dtype_name(candidate.dtype)
        wrong = (g + factor * (c - g)).to(torch.float32 if candidate.dtype != torch.float64 else torch.float64)
        before = float(torch.linalg.vector_norm(torch.nan_to_num(c - g)))
        after = float(torch.linalg.vector_norm(torch.nan_to_num(wrong.double() - g)))
        if before > 0:
            growths.append(after / before)
        return compare(check, wrong, golden, *args, **kwargs)

    return grown


def _smallest_growth(run: Callable[[], list[Comparison]]) -> dict[str, Any]:
    """The smallest error-norm growth on GROWTHS whose checks fail, the error norm's measured growth
    there, and the first failing check's headline."""
    for factor in GROWTHS:
        measured: list[float] = []
        patched = _grown_compare(factor, measured)
        saved = (blocks.compare, gemm.compare, attention.compare)
        blocks.compare = gemm.compare = attention.compare = patched
        try:
            failed = [c for c in run() if not c.passed]
        finally:
            blocks.compare, gemm.compare, attention.compare = saved
        if failed:
            return {
                "fails_at": factor,
                "bits": round(float(torch.log2(torch.tensor(factor))), 2),
                "measured_growth": round(min(measured), 2) if measured else None,
                "seen_by": failed[0].headline()[:160],
            }
    return {"fails_at": None, "bits": None, "measured_growth": None, "seen_by": None}


def precision(device: DeviceInfo, target: torch.device) -> dict[str, dict[str, Any]]:
    """The smallest growth of each check's error norm that fails it: building blocks, the GEMM at
    a Llama-3.1-8B shape and SDPA's named cases."""
    rows: dict[str, dict[str, Any]] = {}
    for block in list(blocks.BLOCKS.values()):
        for name, model, dtype in blocks.block_ids(block, device.is_gpu):
            if not device.is_gpu and dtype in ("bfloat16", "float16") and not block.cpu_low_precision_grads:
                continue
            key = f"block.{name} {model or 'any'} {dtype}"
            rows[key] = _smallest_growth(lambda n=name, m=model, d=dtype: blocks.check_block(n, m, d, device, target))
            print(f"{key:50} {rows[key]}", flush=True)
    problem = gemm_problem("llama-3.1-8b.down", device.is_gpu)
    for dtype in gemm_dtypes(device.backend):
        key = f"gemm {problem.name} {dtype}"
        rows[key] = _smallest_growth(lambda d=dtype: [check_linear(problem, d, device, target)])
        print(f"{key:50} {rows[key]}", flush=True)
    kernel = "flash"
    for dtype in attention_dtypes(device.backend):
        for label in ("plain", "causal", "large-inputs"):
            case = named_case(label, 64, dtype, device.is_gpu)
            key = f"sdpa.{kernel} {label} {dtype}"
            rows[key] = _smallest_growth(lambda c=case: check_attention(c, kernel, device, target))
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
    parser.add_argument("mode", choices=("detect", "needs", "precision"))
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    device, target = _device(args.device)
    rows = {"detect": detect, "needs": needs, "precision": precision}[args.mode](device, target)
    if args.out:
        described = {"name": device.name, "arch": device.arch, "torch": torch.__version__}
        args.out.write_text(json.dumps({"device": described, args.mode: rows}, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
