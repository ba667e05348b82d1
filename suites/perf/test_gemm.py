"""GEMM throughput: bf16, fp16, fp32 (TF32 off) and FP8 at 8192^3 and at BERT-L and
Llama-3.1-8B training shapes, against this device's baselines and datasheet peak."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rocm_validate.core.requirements import scaled_mm_skip_reason
from rocm_validate.perf.kernels import (
    GEMM_DTYPES,
    gemm_kernel,
    gemm_operands,
    gemm_set_bytes,
)
from rocm_validate.perf.timing import sustained_changes
from rocm_validate.workloads.shapes import GEMM_BENCHMARKS, GemmBenchmark, gemm_flops

# Norm-wise relative error of one output tile against float64: a few times the rounding of each
# output format (reduced-precision split-K reductions included), far below a wrong kernel's ~1;
# fp32's 1e-4 also catches TF32 left on (about 1e-3).
TOLERANCE = {"bf16": 2e-2, "fp16": 5e-3, "fp32": 1e-4, "fp8": 2e-2}


@pytest.fixture
def fp32_without_tf32() -> Any:
    """FP32 GEMMs at full FP32 precision (TF32 / XF32 off), restoring the previous setting."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(previous)


def _check_tile(product: Any, a: Any, b: Any, tolerance: float) -> None:
    """The timed kernel computes the right thing: a 64x64 tile against a float64 product."""
    tile = product[:64, :64].double()
    reference = a[:64].double() @ b[:, :64].double()
    error = (torch.linalg.vector_norm(tile - reference) / torch.linalg.vector_norm(reference)).item()
    assert error <= tolerance, f"GEMM output tile is off by {error:.2e} (norm-wise relative), allowed {tolerance:.0e}"


@pytest.mark.parametrize(
    "dtype, case",
    [
        pytest.param(
            dtype,
            case,
            id=f"{dtype}-{case.label}",
            marks=[pytest.mark.rocm_level("quick")] if (dtype, case.label) == ("bf16", "square-8192") else [],
        )
        for dtype in GEMM_DTYPES
        for case in GEMM_BENCHMARKS
    ],
)
def test_gemm_throughput(perf, rocm_device, torch_device, fp32_without_tf32, dtype: str, case: GemmBenchmark) -> None:
    reason = scaled_mm_skip_reason(rocm_device) if dtype == "fp8" else None
    if reason:
        pytest.skip(f"FP8 GEMM {reason}")
    m, n, k = case.shape(perf.scale)
    fp8_format = rocm_device.fp8_formats[0] if dtype == "fp8" else None  # e4m3: fn or fnuz
    rotation = perf.rotation(
        lambda _i: gemm_operands(dtype, m, n, k, torch_device, fp8_format), gemm_set_bytes(dtype, m, n, k)
    )
    kernel = gemm_kernel(dtype, torch_device)
    measured = perf.measure(lambda: kernel(*rotation.next()), **sustained_changes(rocm_device.backend))
    perf.throughput(f"gemm.{dtype}.{m}x{n}x{k}", measured, gemm_flops(m, n, k), "TFLOP/s", peak=dtype)
    a, b = rotation.sets[0]
    _check_tile(kernel(a, b), a.float(), b.float(), TOLERANCE[dtype])
