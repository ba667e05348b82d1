"""Dense GEMMs through each BLAS library of the device (cuBLAS / cuBLASLt, rocBLAS / hipBLASLt)
at BERT-L and Llama-3.1-8B layer shapes, against float64; exact cases catch dropped tiles, and
adversarial ones a reduction of K in the output's type."""

from __future__ import annotations

import pytest

from rocm_validate.core.requirements import (
    not_validated,
    refusal_skip_reason,
)
from rocm_validate.correctness.blas import blas_skip_reason, preferred_blas
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.gemm import (
    check_exact_gemm,
    check_large_output,
    check_linear,
)
from rocm_validate.correctness.reductions import STAGNATION, check_gemm_reduction
from rocm_validate.errors import BlasUnavailable
from rocm_validate.platform.capabilities import BLAS_CHOICES
from rocm_validate.workloads.shapes import GEMM_SHAPES, gemm_problem


@pytest.fixture(params=BLAS_CHOICES)
def blas_library(request, rocm_device):
    """Each BLAS choice in turn, PyTorch switched to it for the test and restored afterwards."""
    reason = blas_skip_reason(request.param, rocm_device)
    if reason:
        pytest.skip(reason)
    try:
        with preferred_blas(request.param, rocm_device.backend) as library:
            yield library
    except BlasUnavailable as refusal:
        not_validated(refusal_skip_reason(f"PyTorch to select the {request.param} BLAS library", refusal))


@pytest.mark.parametrize("shape", list(GEMM_SHAPES))
def test_linear_layer_gemm_matches_float64(rocm_device, torch_device, shape, gemm_dtype, blas_library):
    problem = gemm_problem(shape, rocm_device.is_gpu)
    assert_passed([check_linear(problem, gemm_dtype, rocm_device, torch_device)])


@pytest.mark.rocm_level("quick")
def test_gemm_on_small_integers_is_exact(rocm_device, torch_device, gemm_dtype, blas_library):
    assert_passed([check_exact_gemm(gemm_dtype, rocm_device, torch_device)])


@pytest.mark.requires_gpu
@pytest.mark.requires_memory(16)
def test_bf16_gemm_with_an_output_beyond_2_gib_stores_every_row(rocm_device, torch_device, blas_library):
    assert_passed(check_large_output(rocm_device, torch_device))


def test_gemm_reduces_k_in_float32_on_adversarial_inputs(rocm_device, torch_device, gemm_dtype, blas_library):
    if gemm_dtype not in STAGNATION:
        pytest.skip(f"{gemm_dtype} GEMMs accumulate in their own type: judged by the accuracy test, not bitwise")
    assert_passed(check_gemm_reduction(gemm_dtype, rocm_device, torch_device))
