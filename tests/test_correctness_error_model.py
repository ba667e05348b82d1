"""The error model: unit roundoffs, growth, the element / norm / lean bounds of `compare`, and the
table's promise that every row bounds its check against float64. Each bound has a negative
control: a result just beyond what correct arithmetic can give fails it."""

from __future__ import annotations

import math

import pytest
import torch

from rocm_validate.correctness.compare import compare
from rocm_validate.correctness.error_model import ErrorModel, growth, underflow, unit_roundoff
from rocm_validate.correctness.tolerances import BLOCK_NAMES, RULES, Tolerance

ROUNDING = Tolerance(k=None, model=ErrorModel(rounding=1, source="one rounding"))
TWO_ROUNDINGS = Tolerance(k=None, model=ErrorModel(rounding=2, source="a float32 result, then the dtype"))


def test_unit_roundoffs_are_half_the_machine_epsilon():
    for name in ("float64", "float32", "bfloat16", "float16"):
        assert unit_roundoff(name) == torch.finfo(getattr(torch, name)).eps / 2


def test_an_unknown_precision_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="known: float64, float32"):
        unit_roundoff("float12")


def test_the_underflow_allows_a_float32_result_flushed_to_zero():
    assert underflow("float32") == 2 * torch.finfo(torch.float32).tiny
    assert underflow("float16") == 2.0**-24


@pytest.mark.parametrize("kind, expected", [("none", 1), ("sqrt", 32), ("log2", 10), ("linear", 1024)])
def test_growth_over_1024_terms(kind, expected):
    assert growth(kind, 1024) == expected


def test_a_model_with_a_negative_coefficient_is_refused():
    with pytest.raises(ValueError, match="accumulation must be a finite number >= 0"):
        ErrorModel(accumulation=-1)


def test_the_allowed_lean_is_a_fraction_of_an_ulp_with_a_relative_minimum():
    model = ErrorModel(max_lean=0.1, min_lean=1e-5)
    assert model.allowed_lean("bfloat16") == 0.1 * 2**-8
    assert model.allowed_lean("float32") == 1e-5


def _golden(seed: int = 0, shape: tuple[int, ...] = (64, 512)) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_correctly_rounded_result_passes_one_rounding(dtype):
    golden = _golden()
    result = compare("rounded", golden.to(dtype), golden, ROUNDING)
    assert result.passed and result.model.ratio <= 1, result.message()


def test_two_ulps_off_in_one_element_of_float32_fails_one_rounding():
    golden = _golden()
    candidate = golden.float()
    candidate[3, 7] = candidate[3, 7] * (1 + 2 * 2**-23)
    result = compare("one element", candidate, golden, ROUNDING)
    assert not result.passed and result.model.mismatches == 1 and result.model.worst_index == (3, 7)


def test_a_float32_result_a_tenth_of_a_percent_off_is_thousands_of_bounds_away():
    golden = _golden()
    result = compare("scaled", (golden * 1.001).float(), golden, ROUNDING)
    assert result.model.ratio > 1000 and "farther from float64 than correct float32" in result.headline()


def test_a_bf16_result_a_tenth_of_a_percent_large_fails_only_on_its_lean():
    golden = _golden()
    result = compare("scaled", (golden * 1.001).to(torch.bfloat16), golden, TWO_ROUNDINGS)
    assert result.model.mismatches == 0 and not result.lean_ok
    assert result.model.lean_direction == "away from zero" and 0.0009 < result.model.lean < 0.0011
    assert "leans away from zero by 0.099" in result.headline() and "ulp of bfloat16" in result.headline()


def test_a_lean_below_a_tenth_of_an_ulp_passes():
    golden = _golden()
    assert compare("scaled", (golden * (1 + 2**-13)).to(torch.bfloat16), golden, TWO_ROUNDINGS).passed


def test_a_shared_error_within_each_row_is_not_a_lean():
    """Each row off by its own random relative error (as a row sharing one rstd is): no lean."""
    golden = _golden(1)
    per_row = 1 + 2**-20 * torch.randn(golden.shape[0], 1, generator=torch.Generator().manual_seed(2))
    tolerance = Tolerance(k=None, model=ErrorModel(rounding=1, spread=64, source="rows"))
    result = compare("rows", (golden * per_row).float(), golden, tolerance)
    assert result.model.lean == 0 and result.passed, result.message()


def test_the_magnitude_scales_the_accumulated_error():
    golden = _golden()
    noisy = golden + 1e-4 * torch.ones_like(golden)
    tolerance = Tolerance(k=None, model=ErrorModel(rounding=1, accumulation=1, growth="sqrt", source="acc"))
    small = compare("acc", noisy.float(), golden, tolerance, magnitude=torch.ones(()), terms=4)
    large = compare("acc", noisy.float(), golden, tolerance, magnitude=torch.full((), 1e4), terms=4)
    assert not small.passed and large.model.mismatches == 0


def test_the_norm_bound_of_a_zero_golden_uses_the_magnitude_given():
    golden = torch.zeros(64, 64, dtype=torch.float64)
    noise = 1e-6 * _golden(3, (64, 64))
    tolerance = Tolerance(k=None, model=ErrorModel(rounding=None, norm=64, source="norm"))
    assert not compare("zero", noise.float(), golden, tolerance).passed
    assert compare("zero", noise.float(), golden, tolerance, magnitude=torch.ones(())).passed


def test_a_nan_in_the_candidate_fails_the_model():
    golden = _golden()
    candidate = golden.float()
    candidate[0, 0] = math.nan
    result = compare("nan", candidate, golden, ROUNDING)
    assert not result.passed and result.nonfinite == 1


def _rows_bounded(rule) -> bool:
    tol = rule.tolerance
    exact = tol.k == 0 and tol.atol == 0 and tol.rtol_of_max == 0
    absolute = tol.k == 0 and (tol.atol > 0 or tol.rtol_of_max > 0)  # against the golden alone
    judged_by_sqnr = tol.min_sqnr_db is not None  # SQNR against the float64 golden
    return tol.model is not None or exact or absolute or (judged_by_sqnr and tol.k is None)


def test_every_row_bounds_its_check_against_float64_without_a_reference():
    unbounded = [rule.check for rule in RULES if not _rows_bounded(rule)]
    assert not unbounded, f"rows judged only against a reference: {unbounded}"


def test_every_row_with_a_reference_has_an_error_model():
    relative = [r.check for r in RULES if (r.tolerance.k or r.tolerance.k_norm) and r.tolerance.model is None]
    assert not relative, f"rows whose only bound is relative to a reference: {relative}"


def test_every_building_block_has_an_output_and_a_gradient_row_for_every_platform():
    from rocm_validate.correctness.blocks import BLOCKS

    assert set(BLOCKS) <= set(BLOCK_NAMES)
    rows = {(r.check, r.backend) for r in RULES}
    for name in BLOCK_NAMES:
        assert (f"block.{name}.out", "*") in rows or name == "embedding"
        assert (f"block.{name}.grad", "*") in rows
