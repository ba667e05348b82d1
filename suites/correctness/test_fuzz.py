"""Shape fuzzing with hypothesis for GEMM, FP8 GEMM and SDPA: odd sizes, tails, fewer queries
than keys. The project profile (conftest.py) is derandomized with a bounded example count, so a
CI gate sees the same shapes every run; HYPOTHESIS_PROFILE=thorough explores more.

The shapes explore the libraries' tiling, not the GPU: a second GPU of the node would draw the
same shapes and ask the same question, so in a whole-node run each fuzz test runs on one GPU
(`rocm_shared`; every GPU's numerics are checked by the fixed-shape checks)."""

from __future__ import annotations

import pytest
from hypothesis import given, reject
from hypothesis import strategies as st

from rocm_validate.core.requirements import scaled_mm_skip_reason
from rocm_validate.correctness.attention import (
    MASKS,
    SDPA_KERNELS,
    V_LAYOUTS,
    AttentionCase,
    attention_skip_reason,
    check_attention,
)
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.fp8 import check_scaled_mm
from rocm_validate.correctness.gemm import check_linear
from rocm_validate.errors import BackendRefused
from rocm_validate.platform.capabilities import SCALINGS
from rocm_validate.workloads import fp8
from rocm_validate.workloads.shapes import GemmProblem, attention_dtypes, gemm_dtypes


@pytest.mark.rocm_shared(seconds=1)
@given(data=st.data())
def test_gemm_of_any_shape_matches_float64(rocm_device, torch_device, data):
    top = 512 if rocm_device.is_gpu else 96
    m, n, k = (data.draw(st.integers(1, top), label=axis) for axis in "mnk")
    dtype = data.draw(st.sampled_from(gemm_dtypes(rocm_device.backend)), label="dtype")
    problem = GemmProblem("fuzz", m, n, k)
    assert_passed([check_linear(problem, dtype, rocm_device, torch_device)])


@pytest.mark.rocm_shared(seconds=1)
@pytest.mark.parametrize("scaling", SCALINGS)
@given(data=st.data())
def test_scaled_mm_of_any_aligned_shape_matches_its_emulation(rocm_device, torch_device, scaling, data):
    reason = scaled_mm_skip_reason(rocm_device, scaling, "bfloat16")
    if reason:
        pytest.skip(reason)
    top = 32 if rocm_device.is_gpu else 8  # multiples of 16 up to 512 (GPU) or 128 (CPU)
    m = data.draw(st.integers(1, 16 * top), label="m")
    n, k = (16 * data.draw(st.integers(1, top), label=axis) for axis in "nk")
    fmt = fp8.fp8_format(rocm_device.fp8_formats[0])
    problem = GemmProblem("fuzz", m, n, k)
    assert_passed(check_scaled_mm(problem, fmt, scaling, "bfloat16", rocm_device, torch_device))


# cudnn builds a graph per shape: 13-19 s on the H100 and H200, the others 1-2 s.
FUZZ_SDPA_S = {"cudnn": 13}


@pytest.mark.parametrize(
    "sdpa_kernel",
    [pytest.param(k, marks=pytest.mark.rocm_shared(seconds=FUZZ_SDPA_S.get(k, 2))) for k in SDPA_KERNELS],
)
@given(data=st.data())
def test_sdpa_of_any_shape_matches_the_float64_golden(rocm_device, torch_device, sdpa_kernel, data):
    reason = attention_skip_reason(sdpa_kernel, rocm_device)
    if reason:
        pytest.skip(reason)
    top = 512 if rocm_device.is_gpu else 80
    mask = data.draw(st.sampled_from(MASKS), label="mask")
    seq_q = data.draw(st.integers(1, top), label="seq_q")
    seq_k = seq_q if mask == "causal" else data.draw(st.integers(1, top), label="seq_k")
    case = AttentionCase(
        batch=data.draw(st.integers(1, 2), label="batch"),
        heads=data.draw(st.integers(1, 4), label="heads"),
        seq_q=seq_q,
        seq_k=seq_k,
        head_dim=data.draw(st.sampled_from([8, 16, 32, 40, 64, 80, 96, 128]), label="head_dim"),
        dtype=data.draw(st.sampled_from(attention_dtypes(rocm_device.backend)), label="dtype"),
        mask=mask,
        v_layout=data.draw(st.sampled_from(V_LAYOUTS), label="v_layout"),
    )
    try:
        results = check_attention(case, sdpa_kernel, rocm_device, torch_device)
    except BackendRefused:
        reject()
    assert_passed(results)
