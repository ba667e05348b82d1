"""Negative controls at the boundary: a wrong result just beyond what a healthy kernel does fails
the check, for every check family, on every platform's row of the tolerance table, and the
message says how. (The suite-level controls in test_correctness_negative_controls.py plant the
same kinds of bugs inside the real suite.)"""

from __future__ import annotations

import json

import pytest
import torch

from rocm_validate.correctness.compare import assert_passed, compare, margins
from rocm_validate.correctness.tolerances import RULES, Rule, tolerance_for

# --- systematic bias: rounding the wrong way ---------------------------------------------------


def _bf16_gemm_problem(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A real bf16 GEMM's golden (float64) and its correctly rounded result."""
    golden, _ = _bf16_gemm_with_magnitude(seed)
    return golden, golden.to(torch.bfloat16)


def _bf16_gemm_with_magnitude(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A real bf16 GEMM's golden and |x||W|^T, the terms each element sums (K = 512)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 512, generator=g).to(torch.bfloat16).double()
    w = torch.randn(384, 512, generator=g).to(torch.bfloat16).double()
    return x @ w.t(), x.abs() @ w.abs().t()


def truncate_to_bf16(values: torch.Tensor) -> torch.Tensor:
    """float32 -> bf16 rounding towards zero (drop the low 16 bits), as a broken epilogue would."""
    bits = values.float().contiguous().view(torch.int32) & ~0xFFFF
    return bits.view(torch.float32).to(torch.bfloat16)


def round_up_to_bf16(values: torch.Tensor) -> torch.Tensor:
    """-> bf16 rounding towards +infinity: the nearest bf16, moved one ulp up where it lies below."""
    nearest = values.to(torch.bfloat16)
    below = nearest.double() < values.double()
    step = torch.where(nearest > 0, 1, -1).to(torch.int16)  # one ulp up: away from zero if positive
    bumped = (nearest.view(torch.int16) + step).view(torch.bfloat16)
    return torch.where(below, bumped, nearest)


def test_a_bf16_gemm_that_truncates_instead_of_rounding_fails_on_its_lean_alone():
    golden, reference = _bf16_gemm_problem()
    result = compare(
        "gemm.bfloat16 [truncating epilogue]",
        truncate_to_bf16(golden),
        golden,
        tolerance_for("gemm.bfloat16", "cuda", "sm_90"),
        reference,
    )
    assert result.mismatches == 0, "every element is within one ulp: only the lean test can catch this"
    assert not result.passed and not result.lean_ok and result.model.lean_direction == "towards zero"
    assert "towards zero = " in result.message() and "ulp of bfloat16" in result.message()


def test_a_bf16_gemm_that_rounds_up_fails_leaning_high():
    golden, reference = _bf16_gemm_problem(1)
    result = compare(
        "gemm.bfloat16 [rounding up]",
        round_up_to_bf16(golden),
        golden,
        tolerance_for("gemm.bfloat16", "rocm", "gfx942"),
        reference,
    )
    assert result.mismatches == 0 and not result.passed and result.model.lean_direction == "high"


def test_a_gemm_output_scaled_down_by_one_part_in_2048_fails_the_lean_test():
    golden, reference = _bf16_gemm_problem(2)
    shrunk = (golden * (1 - 2**-11)).to(torch.bfloat16)
    result = compare(
        "gemm.bfloat16 [scaled by 1 - 2^-11]", shrunk, golden, tolerance_for("gemm.bfloat16", "cpu"), reference
    )
    assert not result.passed and result.model.lean_direction == "towards zero"


def test_correct_rounding_shows_no_significant_lean():
    golden, magnitude = _bf16_gemm_with_magnitude(3)
    # a float32 accumulator's error (~sqrt(K) u_fp32 of the terms), then the rounding to bf16
    accumulated = golden + torch.randn_like(golden) * magnitude * 2**-24 * 512**0.5 / 4
    result = compare(
        "gemm.bfloat16 [healthy]",
        accumulated.to(torch.bfloat16),
        golden,
        tolerance_for("gemm.bfloat16", "cuda", "sm_90"),
        golden.to(torch.bfloat16),
        magnitude=magnitude,
        terms=512,
    )
    assert result.passed and result.model.lean_ulps < 0.08, result.message()


# --- SDPA: every platform's row fails a zeroed, halved or sign-flipped output or gradient -------

SDPA_ROWS = sorted({(r.check, r.backend, r.arch, r.library, r.min_seq_k) for r in RULES if r.check.startswith("sdpa.")})


def _attention_like(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A golden gradient and a bf16 reference of it (relative error ~2^-9)."""
    golden = torch.randn(64, 128, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return golden, golden.to(torch.bfloat16)


@pytest.mark.parametrize("row", SDPA_ROWS, ids=lambda r: "-".join(str(p) for p in r if p not in ("", 0, "*")))
@pytest.mark.parametrize("wrong", ["zeroed", "halved", "sign-flipped"])
def test_every_sdpa_row_fails_a_zeroed_halved_or_sign_flipped_result(row, wrong):
    check, backend, arch, library, seq_k = row
    tolerance = tolerance_for(check, "cuda" if backend == "*" else backend, arch, library, seq_k)
    golden, reference = _attention_like(seq_k)
    candidate = {"zeroed": torch.zeros_like(golden), "halved": golden / 2, "sign-flipped": -golden}[wrong]
    result = compare(f"{check} [{wrong}]", candidate, golden, tolerance, reference)
    assert not result.passed, f"{check} on {row}: a {wrong} result passes {tolerance.describe()}"


@pytest.mark.parametrize("row", SDPA_ROWS, ids=lambda r: "-".join(str(p) for p in r if p not in ("", 0, "*")))
def test_every_sdpa_row_passes_a_result_as_good_as_the_reference(row):
    check, backend, arch, library, seq_k = row
    tolerance = tolerance_for(check, "cuda" if backend == "*" else backend, arch, library, seq_k)
    golden, reference = _attention_like(seq_k + 1)
    noise = torch.randn(golden.shape, generator=torch.Generator().manual_seed(seq_k), dtype=torch.float64)
    candidate = (golden * (1 + 2**-10 * noise)).to(torch.bfloat16)  # a different, unbiased rounding
    assert compare(check, candidate, golden, tolerance, reference).passed


def test_a_gradient_scaled_by_09_fails_the_norm_bound_on_cuda():
    golden, reference = _attention_like(7)
    result = compare(
        "sdpa.flash.grad_q [x0.9]",
        (golden * 0.9).to(torch.bfloat16),
        golden,
        tolerance_for("sdpa.flash.grad_q", "cuda", "sm_90"),
        reference,
    )
    assert not result.passed and not result.norm_ok and "Error norm: candidate" in result.message()


# --- FP8 linear: the SQNR gates sit between healthy and a zeroed tile or a 0.92 scale ---------


def _quantized_like(golden: torch.Tensor, sqnr_db: float, seed: int) -> torch.Tensor:
    """golden plus noise of the given SQNR: what a healthy FP8 recipe's output looks like."""
    noise = torch.randn(golden.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return golden + noise * golden.norm() / noise.norm() * 10 ** (-sqnr_db / 20)


@pytest.mark.parametrize("part, healthy_db", [("out", 28.6), ("grad_input", 24.5), ("grad_weight", 24.5)])
def test_fp8_linear_gates_pass_healthy_and_fail_a_zeroed_tile_or_a_092_scale(part, healthy_db):
    golden = torch.randn(4096, 1024, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    healthy = _quantized_like(golden, healthy_db, 4)
    tolerance = tolerance_for(f"fp8_linear.{part}", "cuda", "sm_90")
    tiled = healthy.clone()
    tiled[:128, :128] = 0
    assert compare(f"fp8_linear.{part}", healthy, golden, tolerance).passed
    for label, wrong in (("one 128x128 tile zeroed", tiled), ("scaled by 0.92", healthy * 0.92)):
        result = compare(f"fp8_linear.{part} [{label}]", wrong, golden, tolerance)
        assert not result.passed and "is below the required" in result.headline(), label


# --- graph replay and exact checks: one bit is a failure --------------------------------------


def test_a_graph_replay_one_ulp_off_in_one_element_fails():
    eager = torch.randn(32, 32, dtype=torch.float32)
    replay = eager.clone()
    replay[5, 7] = torch.nextafter(replay[5, 7], torch.tensor(float("inf")))
    result = compare("graph.replay out [replay 3 vs eager]", replay, eager, tolerance_for("graph.replay", "cuda"))
    assert not result.passed and result.mismatches == 1 and "(5, 7)" in result.message()


# --- Inductor and autocast layers fail a result a little off everywhere --------------------------


@pytest.mark.parametrize("check", ["compiled.out", "compiled.grad", "bert_layer.out", "bert_layer.grad"])
def test_a_layer_result_off_by_a_few_reference_errors_everywhere_fails_the_norm_bound(check):
    golden, reference = _attention_like(11)
    error = (reference.double() - golden).abs().mean()
    wrong = golden + 12 * error * torch.sign(golden)  # every element a dozen mean errors off
    result = compare(check, wrong.float(), golden, tolerance_for(check, "cuda", "sm_90"), reference)
    assert not result.passed


def test_the_margins_record_says_how_close_each_bound_came():
    golden, reference = _bf16_gemm_problem(4)
    recorded = margins(
        compare("gemm.bfloat16 [margins]", reference, golden, tolerance_for("gemm.bfloat16", "cpu"), reference)
    )
    assert recorded.passed and recorded.ratio == 1.0 and recorded.norm_ratio == 1.0
    assert recorded.k == 8 and recorded.k_norm == 4 and recorded.allowed_lean == 0.08 * 2**-8
    assert recorded.precision == "bfloat16" and recorded.model_ratio <= 1 and recorded.lean == 0


def test_the_margins_keep_the_reports_keys_and_read_back_from_the_property():
    from rocm_validate.results.margins import margins_in
    from rocm_validate.results.metrics import NUMERICS_PROPERTY

    golden, reference = _bf16_gemm_problem(4)
    recorded = margins(
        compare("gemm.bfloat16 [margins]", reference, golden, tolerance_for("gemm.bfloat16", "cpu"), reference)
    )
    assert list(recorded.to_dict()) == [
        "check", "passed", "ratio", "k", "norm_ratio", "k_norm", "sqnr_db", "reference_sqnr_db", "min_sqnr_db",
        "precision", "model_ratio", "model_norm_ratio", "lean", "lean_ulps", "allowed_lean", "accuracy_ratio",
        "accuracy_factor",
    ]  # fmt: skip
    assert margins_in([(NUMERICS_PROPERTY, json.dumps([recorded.to_dict()]))]) == [recorded]


def test_a_projects_own_rule_is_consulted_before_the_package_table():
    mine = (Rule("gemm.bfloat16", tolerance_for("gemm.float32", "cpu")),)
    assert tolerance_for("gemm.bfloat16", "cpu", rules=mine).k == 64
    assert tolerance_for("gemm.bfloat16", "cpu").k == 8


def test_assert_passed_reports_a_lean_failure_with_its_numbers():
    golden, reference = _bf16_gemm_problem(5)
    result = compare(
        "gemm.bfloat16 [truncating]", truncate_to_bf16(golden), golden, tolerance_for("gemm.bfloat16", "cpu"), reference
    )
    with pytest.raises(AssertionError, match=r"1 of 1 checks failed[\s\S]*standard errors"):
        assert_passed([result])
