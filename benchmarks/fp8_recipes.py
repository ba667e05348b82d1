"""SQNR of the FP8 training recipes at Llama-3.1-8B shapes, healthy and with planted faults: the
numbers the `fp8_recipe.*` floors of the tolerance table are set from.

For each torchao recipe (tensorwise, rowwise, rowwise_with_gw_hp), Transformer Engine's where it
is installed, and the project's delayed-scaling recipe, on a Llama-3.1-8B FFN block and decoder
layer (2 x 1024 tokens; `--tiny` for the CPU-sized model), it runs the same code as the
correctness suite (`rocm_validate.correctness.fp8`) and records, for the output and every
gradient: SQNR against the block in float64 and against the block in the training dtype (bf16 on
a GPU), that block's own SQNR against float64, and the SQNR of the worst 128 x 128 tile; then the loss curves
of 6 AdamW steps. Each is repeated with a planted fault: one 128 x 128 tile of the first weight's
gradient zeroed, the block's output scaled by 0.92, and the recipe's weight dequantization scale
2x off (torchao and the project's recipe), so the margin between healthy runs and faults is in
the same file. Every row also says which checks the current floors fail.

    python benchmarks/fp8_recipes.py OUT.json [--device 0|cpu] [--tiny] [--dtype DTYPE] [--compiled]

On a GPU this takes about a minute (`--compiled` adds torchao's recipes under torch.compile on the
FFN, about 30 s more per recipe); `--tiny --device cpu` checks the script end to end on a CPU.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch

from rocm_validate.core.requirements import fp8_recipe_skip_reason
from rocm_validate.correctness.compare import Comparison, sqnr_db
from rocm_validate.correctness.fp8 import (
    RecipeCase,
    compare_recipe_parts,
    recipe_block_pass,
    recipe_training_losses,
    worst_tile,
)
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.errors import LibraryMissing
from rocm_validate.platform.devices import DeviceInfo, discover_devices
from rocm_validate.platform.selection import DeviceSelection, select_device
from rocm_validate.results import jsonfile
from rocm_validate.workloads import fp8_recipes
from rocm_validate.workloads.fp8_recipes import BLOCKS, FAULTS, RECIPES, TORCHAO_RECIPES
from rocm_validate.workloads.shapes import training_dtype

RESULTS_SCHEMA: dict[str, Any] = {
    "title": "fp8 recipe numerics",
    "type": "object",
    "required": ["device", "scale", "dtype", "rows", "skipped"],
}
FAULTS_BY_LIBRARY = {"transformer_engine": ("zeroed-grad-tile", "output-x0.92")}  # TE keeps its scales in C++


def _db(value: float) -> float | str:
    """A dB figure as JSON: rounded, or 'inf' / '-inf' / 'nan'."""
    return round(value, 3) if math.isfinite(value) else str(value)


def _part_figures(golden: torch.Tensor, reference: torch.Tensor, found: torch.Tensor) -> dict[str, Any]:
    rows, cols = worst_tile(golden, found)

    def tile(t: torch.Tensor) -> torch.Tensor:
        return (t.reshape(-1, t.shape[-1]) if t.dim() > 1 else t.reshape(1, -1))[rows, cols]

    return {
        "shape": list(golden.shape),
        "sqnr_db_vs_float64": _db(sqnr_db(golden, found)),
        "sqnr_db_vs_reference": _db(sqnr_db(reference, found)),
        "reference_sqnr_db_vs_float64": _db(sqnr_db(golden, reference)),
        "worst_tile": f"rows {rows.start}:{rows.stop} cols {cols.start}:{cols.stop}",
        "worst_tile_sqnr_db_vs_float64": _db(sqnr_db(tile(golden), tile(found))),
    }


def _lowest(parts: dict[str, dict[str, Any]], key: str, names: list[str]) -> float | str:
    values = [parts[n][key] for n in names]
    finite = [v for v in values if isinstance(v, float)]
    return min(finite) if len(finite) == len(values) else next(v for v in values if not isinstance(v, float))


def block_row(case: RecipeCase, device: DeviceInfo, torch_device: Any, fault: str) -> dict[str, Any]:
    """One recipe on one block, with or without a planted fault: figures per part and the verdict."""
    started = time.perf_counter()
    golden, reference, found = recipe_block_pass(case, torch_device, fault=fault)
    parts = {name: _part_figures(golden[name], reference[name], found[name]) for name in golden}
    comparisons: list[Comparison] = compare_recipe_parts(case, golden, reference, found, device)
    grads = [n for n in parts if n.startswith("grad.")]
    return {
        "recipe": case.recipe.name,
        "block": case.kind,
        "fault": fault or "none",
        "compiled": case.compiled,
        "label": case.label,
        "parts": parts,
        "lowest_sqnr_db_vs_float64": {
            "out": parts["out"]["sqnr_db_vs_float64"],
            "grad_input": parts["grad_input"]["sqnr_db_vs_float64"],
            "grad_weight": _lowest(parts, "sqnr_db_vs_float64", grads),
            "tile": _lowest(parts, "worst_tile_sqnr_db_vs_float64", list(parts)),
        },
        "failed_checks_at_current_floors": [c.check for c in comparisons if not c.passed],
        "seconds": round(time.perf_counter() - started, 2),
    }


def loss_row(case: RecipeCase, device: DeviceInfo, torch_device: Any, fault: str) -> dict[str, Any]:
    """Loss curves of a few AdamW steps, and their largest deviation from float64 relative to
    the largest float64 loss (what the loss check bounds)."""
    started = time.perf_counter()
    curves = recipe_training_losses(case, torch_device, fault=fault)
    scale = max(abs(v) for v in curves["golden"])

    def deviation(name: str) -> float:
        return max(abs(a - b) for a, b in zip(curves[name], curves["golden"])) / scale

    tolerance = tolerance_for(f"fp8_recipe.{case.kind}.loss", device.backend, device.arch, case.recipe.name)
    return {
        "recipe": case.recipe.name,
        "block": case.kind,
        "fault": fault or "none",
        "label": case.label,
        "curves": curves,
        "relative_deviation": _db(deviation("candidate")),
        "reference_relative_deviation": _db(deviation("reference")),
        "allowed_relative_deviation": tolerance.rtol_of_max,
        "passes_current_floor": deviation("candidate") <= tolerance.rtol_of_max,
        "seconds": round(time.perf_counter() - started, 2),
    }


def _floors(device: DeviceInfo) -> dict[str, Any]:
    """The floors this run was judged against, as the tolerance table has them now."""
    floors = {}
    for kind in BLOCKS:
        for part in ("out", "grad_input", "grad_weight", "tile", "loss"):
            tolerance = tolerance_for(f"fp8_recipe.{kind}.{part}", device.backend, device.arch)
            floors[f"fp8_recipe.{kind}.{part}"] = {
                "min_sqnr_db": tolerance.min_sqnr_db,
                "rtol": tolerance.rtol_of_max,
                "source": tolerance.source,
            }
    return floors


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"torch": torch.__version__, "hip": torch.version.hip, "cuda": torch.version.cuda}
    for package in ("torchao", "transformer_engine"):
        try:
            found[package] = getattr(fp8_recipes.import_library(package), "__version__", "unknown")
        except LibraryMissing:
            found[package] = None
    return found


def cases(device: DeviceInfo, scale: str, dtype: str, compiled: bool) -> tuple[list[RecipeCase], list[dict[str, str]]]:
    """Every recipe x block this device and installation can run, and why the others cannot."""
    runnable, skipped = [], []
    for name, recipe in RECIPES.items():
        reason = fp8_recipe_skip_reason(device, recipe)
        if reason is None and recipe.package:
            try:
                fp8_recipes.import_library(recipe.package)
            except LibraryMissing as missing:
                reason = f"{name}: {missing}"
        if reason:
            skipped.append({"recipe": name, "reason": reason})
            continue
        formats = tuple(device.fp8_formats[:2])
        runnable += [RecipeCase(recipe, kind, scale, formats, dtype) for kind in BLOCKS]
        if compiled and name in TORCHAO_RECIPES:
            runnable.append(RecipeCase(recipe, "ffn", scale, formats, dtype, compiled=True))
    return runnable, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="where to write the results (JSON)")
    parser.add_argument("--device", default=None, help="GPU index or 'cpu' (default: GPU 0, else the CPU)")
    parser.add_argument(
        "--tiny", action="store_true", help="the CPU-sized Llama (2 x 32 tokens) instead of the full one"
    )
    parser.add_argument(
        "--dtype",
        default=None,
        help="the training dtype of the reference and the recipes (default: bfloat16 on a GPU, "
        "float32 on the CPU, where torchao ignores CPU autocast)",
    )
    parser.add_argument("--compiled", action="store_true", help="also torchao's recipes under torch.compile (FFN)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    device = select_device(discover_devices(), DeviceSelection.parse(args.device or "auto", "--device"))
    torch_device = torch.device("cpu") if not device.is_gpu else torch.device("cuda", device.index)
    scale = "tiny" if args.tiny else "full"
    dtype = args.dtype or training_dtype(device.backend)
    runnable, skipped = cases(device, scale, dtype, args.compiled)
    for skip in skipped:
        print(f"skipped {skip['reason']}", flush=True)
    rows, losses = [], []
    for case in runnable:
        faults = () if case.compiled else FAULTS_BY_LIBRARY.get(case.recipe.library, FAULTS)
        for fault in ("", *faults):
            row = block_row(case, device, torch_device, fault)
            rows.append(row)
            print(
                f"{row['label']:<80} {row['fault']:<17} lowest dB vs float64 {row['lowest_sqnr_db_vs_float64']} "
                f"fails {len(row['failed_checks_at_current_floors'])} checks ({row['seconds']} s)",
                flush=True,
            )
            if case.compiled:
                torch._dynamo.reset()
                continue
            loss = loss_row(case, device, torch_device, fault)
            losses.append(loss)
            print(
                f"{'':<80} {loss['fault']:<17} loss deviation {loss['relative_deviation']} (bf16 "
                f"{loss['reference_relative_deviation']}, allowed {loss['allowed_relative_deviation']})",
                flush=True,
            )
    results = {
        "device": device.to_dict(),
        "versions": _versions(),
        "scale": scale,
        "dtype": dtype,
        "block_size": vars(fp8_recipes.block_size(scale)),
        "floors": _floors(device),
        "rows": rows,
        "losses": losses,
        "skipped": skipped,
        "seconds": round(time.perf_counter() - started, 1),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
    }
    jsonfile.write_json(args.out, results, RESULTS_SCHEMA)
    print(f"wrote {args.out} ({len(rows)} block rows, {len(losses)} loss rows, {results['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
