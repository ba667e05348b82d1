"""Adversarial reductions: exact for a float32 accumulator, far off for one in the output's type."""

from __future__ import annotations

import torch

from rocm_validate.correctness.compare import compare
from rocm_validate.correctness.reductions import check_gemm_reduction, check_sum_reduction, gemm_cases
from rocm_validate.correctness.tolerances import tolerance_for


def _sequential_sum(rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Each row summed term by term in `dtype` (an accumulator in the narrow type)."""
    total = torch.zeros(rows.shape[0], dtype=dtype)
    for column in rows.to(dtype).unbind(-1):
        total = total + column
    return total


def test_the_cpus_gemms_and_sums_are_exact_on_the_adversarial_inputs(cpu):
    for dtype in ("bfloat16", "float16"):
        assert all(c.passed for c in check_gemm_reduction(dtype, cpu, "cpu")), dtype
        assert all(c.passed for c in check_sum_reduction(dtype, cpu, "cpu")), dtype


def test_a_bf16_accumulator_stagnates_and_fails():
    (label, x, _), *_ = gemm_cases("bfloat16", torch.Generator().manual_seed(0), rows=8)
    result = compare(
        label, _sequential_sum(x, torch.bfloat16), x.double().sum(-1), tolerance_for("reduction.exact", "cpu")
    )
    assert not result.passed and result.candidate_error >= 16  # ulps of 256 in bf16 are 2


def test_an_fp16_accumulator_overflows_and_fails():
    cases = gemm_cases("float16", torch.Generator().manual_seed(0), rows=4)
    label, x, w = next(case for case in cases if "overflow" in case[0])
    terms = x * w[0]
    result = compare(
        label, _sequential_sum(terms, torch.float16), terms.double().sum(-1), tolerance_for("reduction.exact", "cpu")
    )
    assert not result.passed and result.nonfinite > 0


def test_the_adversarial_gemms_run_with_reduced_precision_reductions_off_and_restore_them():
    from rocm_validate.correctness.reductions import full_precision_reductions

    matmul = torch.backends.cuda.matmul
    before = (matmul.allow_fp16_reduced_precision_reduction, matmul.allow_bf16_reduced_precision_reduction)
    with full_precision_reductions():
        inside = (matmul.allow_fp16_reduced_precision_reduction, matmul.allow_bf16_reduced_precision_reduction)
    after = (matmul.allow_fp16_reduced_precision_reduction, matmul.allow_bf16_reduced_precision_reduction)
    assert inside == (False, False)
    assert after == before
