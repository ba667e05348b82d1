"""The comparator: it passes what is within tolerance and rejects every kind of wrong result."""

from __future__ import annotations

import math

import pytest
import torch

from rocm_validate.correctness.compare import assert_passed, compare, sqnr_db
from rocm_validate.correctness.tolerances import EXACT, Tolerance

TOL = Tolerance(k=4, atol=1e-5, source="test")


def _golden_and_reference() -> tuple[torch.Tensor, torch.Tensor]:
    golden = torch.linspace(-1, 1, 64, dtype=torch.float64).reshape(8, 8)
    return golden, golden.to(torch.bfloat16)


def test_a_candidate_as_good_as_the_reference_passes():
    golden, reference = _golden_and_reference()
    result = compare("ok", reference.clone(), golden, TOL, reference)
    assert result.passed and result.mismatches == 0 and result.ratio == pytest.approx(1.0)


def test_a_candidate_off_by_more_than_k_reference_errors_fails_naming_the_worst_element():
    golden, reference = _golden_and_reference()
    candidate = reference.clone()
    candidate[3, 5] += 0.25
    result = compare("sdpa.flash.out", candidate, golden, TOL, reference)
    assert not result.passed
    assert result.mismatches == 1 and result.worst_index == (3, 5)
    message = result.message()
    assert "sdpa.flash.out: the candidate differs from the golden beyond tolerance" in message
    assert "Mismatched elements: 1 / 64" in message and "at index (3, 5)" in message
    assert "ratio" in message and "(k = 4)" in message
    assert "Tolerance: k=4, atol=1e-05, rtol_of_max=0 (test)" in message


def test_nan_in_the_candidate_where_the_golden_is_finite_fails():
    golden, reference = _golden_and_reference()
    candidate = reference.clone()
    candidate[0, 0] = float("nan")
    result = compare("nan", candidate, golden, TOL, reference)
    assert not result.passed and result.nonfinite == 1 and result.worst_index == (0, 0)
    assert "NaN or Inf where the golden is finite" in result.message()


def test_inf_in_the_candidate_fails_even_with_an_sqnr_only_tolerance():
    golden, _ = _golden_and_reference()
    candidate = golden.clone()
    candidate[1, 1] = math.inf
    result = compare("inf", candidate, golden, Tolerance(k=None, min_sqnr_db=10, source="t"))
    assert not result.passed and result.nonfinite == 1


def test_nan_in_the_reference_does_not_loosen_the_bound():
    golden, reference = _golden_and_reference()
    broken_reference = reference.clone()
    broken_reference[2, 2] = float("nan")
    candidate = reference.clone()
    candidate[4, 4] += 0.5
    assert not compare("ref-nan", candidate, golden, TOL, broken_reference).passed


def test_a_nan_golden_requires_a_nan_candidate():
    golden = torch.tensor([1.0, math.nan, math.inf])
    assert compare("special", golden.clone(), golden, EXACT).passed
    wrong = torch.tensor([1.0, 0.0, math.inf])
    assert not compare("special", wrong, golden, EXACT).passed
    wrong_sign = torch.tensor([1.0, math.nan, -math.inf])
    assert not compare("special", wrong_sign, golden, EXACT).passed


def test_an_exact_check_rejects_a_one_ulp_difference():
    golden = torch.arange(16, dtype=torch.float32)
    candidate = golden.clone()
    candidate[7] = torch.nextafter(candidate[7], torch.tensor(100.0))
    result = compare("exact", candidate, golden, EXACT)
    assert not result.passed and result.worst_index == (7,) and "exact" in result.message()


def test_the_allowance_lets_a_tiny_error_pass_when_the_reference_is_exact():
    golden = torch.ones(4, dtype=torch.float64)
    candidate = golden + 1e-6
    assert compare("allowance", candidate, golden, TOL, golden.clone()).passed
    assert not compare("allowance", golden + 1e-4, golden, TOL, golden.clone()).passed


def test_sqnr_is_twenty_log_of_signal_over_noise():
    golden = torch.ones(100, dtype=torch.float64)
    assert sqnr_db(golden, golden * 1.1) == pytest.approx(20.0)
    assert sqnr_db(golden, golden) == math.inf
    assert math.isnan(sqnr_db(golden, torch.full_like(golden, math.nan)))


def test_a_low_sqnr_fails_an_sqnr_gated_check():
    golden = torch.randn(256, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    noisy = golden + 0.3 * torch.randn(256, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    result = compare("fp8_linear.out", noisy, golden, Tolerance(k=None, min_sqnr_db=20, source="t"))
    assert not result.passed and "below the required 20 dB" in result.message()
    assert compare("fp8_linear.out", golden + 1e-3 * noisy, golden, Tolerance(k=None, min_sqnr_db=20)).passed


def test_a_shape_mismatch_is_a_failure_naming_both_shapes():
    result = compare("shape", torch.zeros(3, 4), torch.zeros(4, 3), EXACT)
    assert not result.passed and "(3, 4)" in result.message() and "(4, 3)" in result.message()


def test_assert_passed_lists_every_failed_check():
    golden = torch.zeros(4)
    results = [
        compare("a", golden + 1, golden, EXACT),
        compare("b", golden, golden, EXACT),
        compare("c", golden - 1, golden, EXACT),
    ]
    with pytest.raises(AssertionError) as failure:
        assert_passed(results)
    text = str(failure.value)
    assert text.startswith("2 of 3 checks failed") and "a: " in text and "c: " in text and "\nb: " not in text


def test_recording_comparisons_can_be_closed_from_another_thread():
    """The watchdog finishes a hung run's session from its own thread, which tears down the
    correctness suite's recording fixture there: closing it must not raise."""
    import threading

    from rocm_validate.correctness.compare import recording_comparisons

    recording = recording_comparisons()
    recording.__enter__()
    errors: list[BaseException] = []

    def close() -> None:
        try:
            recording.__exit__(None, None, None)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=close)
    thread.start()
    thread.join()
    assert errors == []


def test_a_tolerance_still_takes_rtol_as_the_former_name_of_rtol_of_max_and_warns():
    with pytest.warns(DeprecationWarning, match="rtol_of_max"):
        tolerance = Tolerance(k=4, rtol=1e-3)
    assert tolerance.rtol_of_max == 1e-3
