"""torch._scaled_mm (the FP8 GEMM) against the emulation of its own FP8 operands: exact on
representable inputs, within tolerance and >= 25 dB SQNR on random data at BERT-L / Llama-3.1-8B
shapes, with tensor-wise and row-wise scales, and on sliced / row-offset (strided) operands."""

from __future__ import annotations

import pytest

from rocm_validate.core.requirements import scaled_mm_skip_reason
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.fp8 import (
    EXACT_KINDS,
    LAYOUTS,
    check_scaled_mm,
    check_scaled_mm_exact,
)
from rocm_validate.workloads import fp8
from rocm_validate.workloads.shapes import GEMM_SHAPES, gemm_problem

VARIANTS = [("tensorwise", "bfloat16"), ("tensorwise", "float32"), ("rowwise", "bfloat16")]


def _forward_format(rocm_device, scaling: str, out_dtype: str) -> fp8.Fp8Format:
    reason = scaled_mm_skip_reason(rocm_device, scaling, out_dtype)
    if reason:
        pytest.skip(reason)
    return fp8.fp8_format(rocm_device.fp8_formats[0])


@pytest.mark.rocm_level("quick")
@pytest.mark.parametrize("scaling,out_dtype", VARIANTS)
@pytest.mark.parametrize("kind", EXACT_KINDS)
def test_scaled_mm_is_exact_on_representable_inputs(rocm_device, torch_device, kind, scaling, out_dtype):
    fmt = _forward_format(rocm_device, scaling, out_dtype)
    assert_passed([check_scaled_mm_exact(kind, fmt, scaling, out_dtype, torch_device)])


@pytest.mark.parametrize("scaling,out_dtype", VARIANTS)
@pytest.mark.parametrize("shape", list(GEMM_SHAPES))
def test_scaled_mm_matches_the_emulation_of_its_operands(rocm_device, torch_device, shape, scaling, out_dtype):
    fmt = _forward_format(rocm_device, scaling, out_dtype)
    problem = gemm_problem(shape, rocm_device.is_gpu)
    assert_passed(check_scaled_mm(problem, fmt, scaling, out_dtype, rocm_device, torch_device))


@pytest.mark.parametrize("layout", [layout for layout in LAYOUTS if layout != "contiguous"])
@pytest.mark.parametrize("scaling,out_dtype", VARIANTS)
def test_scaled_mm_accepts_strided_operands(rocm_device, torch_device, layout, scaling, out_dtype):
    fmt = _forward_format(rocm_device, scaling, out_dtype)
    problem = gemm_problem("llama-3.1-8b.qkv", rocm_device.is_gpu)
    results = check_scaled_mm(problem, fmt, scaling, out_dtype, rocm_device, torch_device, layout)
    assert_passed(results)
