"""Fused GEMM epilogues at BERT-L's FFN widths: the BLAS-Lt bias + GELU and bias + ReLU epilogues
(`torch._addmm_activation`), Inductor-fused dense + GELU (erf and tanh), and apex's FusedDense
and FusedDenseGeluDense when installed, forward and backward, against float64 with the GELU
each path claims (rocm_validate.correctness.epilogues)."""

from __future__ import annotations

import pytest

from rocm_validate.core.requirements import import_optional
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.epilogues import APEX_INSTALL, PATHS, check_epilogue

CORE_PATHS = [name for name, path in PATHS.items() if not path.library]
APEX_PATHS = [name for name, path in PATHS.items() if path.library == "apex"]


@pytest.mark.parametrize("path", CORE_PATHS)
def test_fused_epilogue_matches_float64_with_the_activation_it_claims(rocm_device, torch_device, path, gemm_dtype):
    try:
        assert_passed(check_epilogue(path, gemm_dtype, rocm_device, torch_device))
    finally:
        if path.startswith("compiled"):
            import torch

            torch._dynamo.reset()


@pytest.mark.requires_gpu
@pytest.mark.parametrize("path", APEX_PATHS)
def test_apex_fused_dense_matches_float64_with_the_activation_it_claims(rocm_device, torch_device, path, gemm_dtype):
    import_optional("apex.fused_dense", f"validate {path}", APEX_INSTALL)
    assert_passed(check_epilogue(path, gemm_dtype, rocm_device, torch_device))
