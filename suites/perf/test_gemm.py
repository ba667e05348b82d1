"""GEMM throughput: bf16, fp16, fp32 (TF32 off) and FP8 at 8192^3 and at BERT-L and
Llama-3.1-8B training shapes, against this device's baselines and datasheet peak."""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

from rocm_validate.perf_cases import GEMM_CASES, GemmCase, gemm_flops

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": None}
# Norm-wise relative error of one output tile against float64: the rounding of each output
# format; fp32's 1e-4 also catches TF32 left on (about 1e-3).
TOLERANCE = {"bf16": 1e-2, "fp16": 2e-3, "fp32": 1e-4, "fp8": 1e-2}


@pytest.fixture
def fp32_without_tf32() -> Any:
    """FP32 GEMMs at full FP32 precision (TF32 / XF32 off), restoring the previous setting."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(previous)


def _operand_maker(dtype: str, m: int, n: int, k: int, device: Any, fp8_name: str | None) -> Callable[[int], tuple]:
    """make(i) -> (A[M,K], B[K,N]); for FP8, B is column-major as torch._scaled_mm requires."""

    def make(_index: int) -> tuple[Any, Any]:
        if dtype == "fp8":
            fp8 = getattr(torch, f"float8_{fp8_name}")
            a = torch.randn(m, k, device=device).to(fp8)
            b = torch.randn(n, k, device=device).to(fp8).t()
            return a, b
        return torch.randn(m, k, device=device, dtype=DTYPES[dtype]), torch.randn(k, n, device=device, dtype=DTYPES[dtype])

    return make


def _check_tile(product: Any, a: Any, b: Any, tolerance: float) -> None:
    """The timed kernel computes the right thing: a 64x64 tile against a float64 product."""
    tile = product[:64, :64].double()
    reference = a[:64].double() @ b[:, :64].double()
    error = (torch.linalg.vector_norm(tile - reference) / torch.linalg.vector_norm(reference)).item()
    assert error <= tolerance, f"GEMM output tile is off by {error:.2e} (norm-wise relative), allowed {tolerance:.0e}"


@pytest.mark.parametrize("case", GEMM_CASES, ids=lambda c: c.label)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_gemm_throughput(perf, rocm_device, torch_device, fp32_without_tf32, dtype: str, case: GemmCase) -> None:
    if dtype == "fp8" and not (rocm_device.scaled_mm and rocm_device.fp8_formats):
        pytest.skip(f"needs FP8 and torch._scaled_mm, found none on {rocm_device.arch}")
    m, n, k = case.shape(perf.scale)
    fp8_name = rocm_device.fp8_formats[0] if dtype == "fp8" else None  # e4m3 (fn or fnuz)
    element = 1 if dtype == "fp8" else DTYPES[dtype].itemsize
    rotation = perf.rotation(_operand_maker(dtype, m, n, k, torch_device, fp8_name), element * (m * k + k * n))
    if dtype == "fp8":
        one = torch.ones((), device=torch_device)

        def gemm(a: Any, b: Any) -> Any:
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    else:
        gemm = torch.matmul

    measured = perf.measure(lambda: gemm(*rotation.next()))
    perf.throughput(f"gemm.{dtype}.{m}x{n}x{k}", measured, gemm_flops(m, n, k), "TFLOP/s", peak=dtype)
    a, b = rotation.sets[0]
    _check_tile(gemm(a, b), a.float(), b.float(), TOLERANCE[dtype])
