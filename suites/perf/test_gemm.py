"""GEMM throughput: bf16, fp16, fp32 (TF32 off) and FP8 at 8192^3 and at BERT-L and
Llama-3.1-8B training shapes, against this device's baselines and datasheet peak."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rocm_validate.core.requirements import scaled_mm_skip_reason
from rocm_validate.perf.kernels import (
    GEMM_DTYPES,
    check_gemm_tile,
    gemm_kernel,
    gemm_operands,
    gemm_set_bytes,
)
from rocm_validate.perf.timing import sustained_changes
from rocm_validate.workloads.shapes import GEMM_BENCHMARKS, GemmBenchmark, gemm_flops


@pytest.fixture
def fp32_without_tf32() -> Any:
    """FP32 GEMMs at full FP32 precision (TF32 / XF32 off), restoring the previous setting."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(previous)


def _level(dtype: str, label: str) -> list[Any]:
    """bf16 at 8192^3 is the quick level's GEMM. FP32 with TF32 off is one SGEMM path that no
    training recipe runs: the standard level times it at 8192^3, the extended level at the model
    shapes too (3.5 s a shape, on every GPU)."""
    if (dtype, label) == ("bf16", "square-8192"):
        return [pytest.mark.rocm_level("quick")]
    if dtype == "fp32" and label != "square-8192":
        return [pytest.mark.rocm_level("extended")]
    return []


@pytest.mark.parametrize(
    "dtype, case",
    [
        pytest.param(dtype, case, id=f"{dtype}-{case.label}", marks=_level(dtype, case.label))
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
    check_gemm_tile(kernel(a, b), a, b, dtype)
