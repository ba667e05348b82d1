"""Degenerate shapes judged by every criterion on the CPU: one query and one key (a causal grad_q
that is exactly 0), single elements, and the fuzz tests' strategies over more examples than the
suite's derandomized profile draws, so a zero or tiny golden never fails a healthy kernel."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocm_validate.correctness.attention import MASKS, AttentionCase, check_attention
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.gemm import check_linear
from rocm_validate.workloads.shapes import GemmProblem, gemm_dtypes


@pytest.mark.parametrize("mask", MASKS)
def test_sdpa_with_one_query_and_one_key_passes_every_criterion(cpu, mask):
    case = AttentionCase(batch=1, heads=1, seq_q=1, seq_k=1, head_dim=8, dtype="float32", mask=mask)
    assert_passed(check_attention(case, "flash", cpu, "cpu"))


@settings(max_examples=25, deadline=None, database=None)
@given(seq_q=st.integers(1, 24), seq_k=st.integers(1, 24), mask=st.sampled_from(MASKS), seed=st.integers(0, 2**16))
@example(seq_q=1, seq_k=1, mask="causal", seed=0)
@example(seq_q=3, seq_k=1, mask="bool", seed=1)
def test_sdpa_of_small_shapes_over_many_seeds_passes(cpu, seq_q, seq_k, mask, seed):
    seq_k = seq_q if mask == "causal" else seq_k
    case = AttentionCase(batch=1, heads=2, seq_q=seq_q, seq_k=seq_k, head_dim=8, dtype="float32", mask=mask)
    assert_passed(check_attention(case, "flash", cpu, "cpu", seed=seed))


@settings(max_examples=25, deadline=None, database=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 300), seed=st.integers(0, 2**16))
@example(m=1, n=1, k=1, seed=0)
def test_gemm_of_small_shapes_over_many_seeds_passes(cpu, m, n, k, seed):
    for dtype in gemm_dtypes("cpu"):
        assert_passed([check_linear(GemmProblem("fuzz", m, n, k), dtype, cpu, "cpu", seed=seed)])
