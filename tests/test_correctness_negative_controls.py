"""Negative controls: the real correctness suite, run against deliberately wrong implementations
(monkeypatched in through a plugin), fails and says which check, by how much, and the tolerance.

Each control runs one suite file of this repository with `--rootdir` at the repository (so suite
membership, conftests and the hypothesis profile are the real ones) on the CPU, in a subprocess:
an in-process run would let pytester unload torch modules between runs, which crashes torch.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "suites" / "correctness"
PLANTED = REPO / "benchmarks" / "planted_bugs.py"


def _planted() -> ModuleType:
    """benchmarks/planted_bugs.py, whose plugin sources plant each bug (and run them on any device)."""
    spec = importlib.util.spec_from_file_location("planted_bugs", PLANTED)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("planted_bugs", module)
    spec.loader.exec_module(module)
    return module


_BUGS = _planted()
WRONG_SDPA = _BUGS.WRONG_SDPA
WRONG_SCALED_MM = _BUGS.WRONG_SCALED_MM
WRONG_FUSED_ADAMW = _BUGS.WRONG_FUSED_ADAMW
WRONG_FP8_LINEAR = _BUGS.WRONG_FP8_LINEAR
WRONG_GEMM_TRUNCATES = _BUGS.WRONG_GEMM_TRUNCATES
WRONG_FP8_CAST = _BUGS.WRONG_FP8_CAST
WRONG_FP8_TILE = _BUGS.WRONG_FP8_TILE
WRONG_COMPILE = _BUGS.WRONG_COMPILE
WRONG_FUSED_ATTENTION = _BUGS.WRONG_FUSED_ATTENTION
WRONG_LAYER_NORM_SCALE = _BUGS.WRONG_LAYER_NORM_SCALE
WRONG_GELU_APPROXIMATION = _BUGS.WRONG_GELU_APPROXIMATION
WRONG_COMPILE_LEAN = _BUGS.WRONG_COMPILE_LEAN
WRONG_EPILOGUE_GELU = _BUGS.WRONG_EPILOGUE_GELU
WRONG_PACKED_MASK = _BUGS.WRONG_PACKED_MASK
WRONG_SPLIT_K_BF16 = _BUGS.WRONG_SPLIT_K_BF16
WRONG_SOFTMAX_BF16_SUM = _BUGS.WRONG_SOFTMAX_BF16_SUM
WRONG_LAYER_NORM_BF16_STATS = _BUGS.WRONG_LAYER_NORM_BF16_STATS
WRONG_SDPA_BF16_ACCUMULATOR = _BUGS.WRONG_SDPA_BF16_ACCUMULATOR


@pytest.fixture
def run_suite_with(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Callable[..., pytest.RunResult]:
    """run(wrong, suite_file, keyword): one suite file of this repository with the `wrong` plugin
    active, on the CPU."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # this checkout's rocm_validate, not an installed one

    def run(wrong: str, suite_file: str, keyword: str) -> pytest.RunResult:
        pytester.makepyfile(wrong_implementation=wrong)
        return pytester.runpytest_subprocess(
            str(SUITE / suite_file),
            "-p",
            "wrong_implementation",
            "--rootdir",
            str(REPO),
            "-p",
            "no:cacheprovider",
            "--rocm-device=cpu",
            "-k",
            keyword,
            "-q",
        )

    return run


def assert_failure_report(result: pytest.RunResult, check: str, *details: str) -> None:
    """The failure names the check and has the assert_close-shaped body with the tolerance."""
    text = result.stdout.str()
    for part in (check, "Mismatched elements:", "Greatest absolute difference:", "Tolerance:", *details):
        assert part in text, f"expected {part!r} in the suite's failure report:\n{text[-3000:]}"


def test_sdpa_reading_a_transposed_v_as_contiguous_fails_only_the_transposed_v_case(run_suite_with):
    result = run_suite_with(WRONG_SDPA, "test_sdpa.py", "float32-v-transposed-64-flash or float32-plain-64-flash")
    result.assert_outcomes(failed=1, passed=1)
    assert_failure_report(
        result,
        "sdpa.flash.out [B2 H2 Lq64 Lk64 D64, float32, mask none, V transposed]",
        "the candidate differs from the golden beyond tolerance",
        "low-precision reference",
        "(k = 8)",
    )


def test_scaled_mm_two_percent_off_fails_the_emulation_check(run_suite_with):
    result = run_suite_with(
        WRONG_SCALED_MM,
        "test_fp8_gemm.py",
        "test_scaled_mm_matches_the_emulation_of_its_operands and bert-large.ffn_up-tensorwise-bfloat16",
    )
    result.assert_outcomes(failed=1)
    assert_failure_report(
        result, "scaled_mm.emulation [e4m3fn tensorwise -> bfloat16, contiguous operands", "ratio", "(k = 4)"
    )


def test_fused_adamw_with_a_wrong_step_size_fails_the_adamw_check(run_suite_with):
    result = run_suite_with(WRONG_FUSED_ADAMW, "test_optimizers.py", "fused-float32 or foreach-float32")
    result.assert_outcomes(failed=1, passed=1)
    assert_failure_report(result, "adamw[fused].param[0] (256, 64) (float32, after 20 steps)", "(k = 4)")


def test_an_fp8_linear_losing_a_scale_fails_the_sqnr_gate(run_suite_with):
    result = run_suite_with(WRONG_FP8_LINEAR, "test_fp8_linear.py", "test_reference_fp8_linear_tracks_nn_linear")
    result.assert_outcomes(failed=1)
    assert_failure_report(
        result,
        "fp8_linear.out [own recipe e4m3fn/e5m2, 64x128->256, float32]",
        "is below the required 26.5 dB",
        "SQNR >= 26.5 dB",
    )


def test_a_bf16_gemm_truncating_instead_of_rounding_fails_on_its_lean(run_suite_with):
    result = run_suite_with(
        WRONG_GEMM_TRUNCATES, "test_gemm.py", "test_linear_layer and bfloat16 and default and bert-large.qkv"
    )
    result.assert_outcomes(failed=1)
    assert_failure_report(
        result,
        "gemm.bfloat16 [bert-large.qkv",
        "towards zero = ",
        "ulp of bfloat16",
        "Mismatched elements: 0 /",
    )


def test_an_fp8_cast_rounding_odd_patterns_down_fails_the_bitwise_check(run_suite_with):
    result = run_suite_with(WRONG_FP8_CAST, "test_fp8_casts.py", "test_casts_round_to_nearest_even and forward-float32")
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "fp8.cast [e4m3fn from float32: round to nearest even", "exact")


def test_an_fp8_linear_losing_one_tile_of_its_weight_gradient_fails_the_sqnr_gate(run_suite_with):
    result = run_suite_with(WRONG_FP8_TILE, "test_fp8_linear.py", "test_reference_fp8_linear_tracks_nn_linear")
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "fp8_linear.grad_weight [own recipe", "is below the required 22.5 dB")


def test_compiled_layers_off_by_one_part_in_ten_thousand_fail(run_suite_with):
    result = run_suite_with(
        WRONG_COMPILE,
        "test_compiled.py",
        "test_compiled_layer_norm_gelu_and_dense_bias_gelu_match_eager and not float32",
    )
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "compiled.layer_norm.out [Inductor", "(k = 4)")


def test_fused_attention_five_percent_off_under_autocast_fails_the_layer_check(run_suite_with):
    result = run_suite_with(
        WRONG_FUSED_ATTENTION, "test_layers.py", "test_bert_large_layer_under_bf16_autocast_matches_float64"
    )
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "bert_layer.layer.grad_attention.self.query.weight [BERT-L tiny layer")


def assert_numerics_failure(result: pytest.RunResult, check: str, *details: str) -> None:
    """The run fails in the numerics category, and the failure names the op, the dtype and the lean."""
    text = result.stdout.str()
    assert "failed (numerics:" in text, text[-3000:]
    assert_failure_report(result, check, "Lean: ", "% of |golden| ", *details)


def test_a_layer_norm_one_part_in_a_thousand_too_large_fails_in_every_dtype(run_suite_with):
    result = run_suite_with(WRONG_LAYER_NORM_SCALE, "test_blocks.py", "layer_norm-bert-large")
    result.assert_outcomes(failed=4)  # LayerNorm and residual add + LayerNorm, in fp32 and bf16
    assert_numerics_failure(result, "block.layer_norm.out [bert-large, float32", "away from zero = ")
    assert_numerics_failure(result, "block.layer_norm.out [bert-large, bfloat16", "leans away from zero by 0.09")


def test_the_exact_gelu_computed_as_its_tanh_approximation_fails(run_suite_with):
    result = run_suite_with(WRONG_GELU_APPROXIMATION, "test_blocks.py", "gelu-float32 and not tanh")
    result.assert_outcomes(failed=1)
    assert_numerics_failure(
        result, "block.gelu.out [any shape, float32", "farther from float64 than correct float32 arithmetic can be"
    )


def test_compiled_layers_leaning_two_parts_in_a_thousand_fail(run_suite_with):
    result = run_suite_with(WRONG_COMPILE_LEAN, "test_compiled.py", "layer_norm_gelu and not in_float32")
    result.assert_outcomes(failed=1)
    assert_numerics_failure(result, "compiled.layer_norm.out [Inductor, 64x128, float32]", "away from zero = ")


def test_a_gelu_epilogue_computing_the_other_gelu_fails(run_suite_with):
    result = run_suite_with(WRONG_EPILOGUE_GELU, "test_epilogues.py", "addmm_gelu and float32")
    result.assert_outcomes(failed=1)
    assert_numerics_failure(
        result, "epilogue.addmm_gelu.out [64x64x256, float32, claims gelu_erf]", "Against the float32 error model:"
    )


def test_a_fused_attention_reading_the_packed_mask_one_token_off_fails_naming_the_sequence(run_suite_with):
    result = run_suite_with(WRONG_PACKED_MASK, "test_packed_attention.py", "mask-flash")
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "packed.mask-flash.out [4 blocks of 64 tokens (64 | 37+27 | 25+23+16 | 1+31+32)")
    assert "worst in block " in result.stdout.str()


def test_a_split_k_gemm_reducing_in_bf16_fails_saying_how_many_bits_it_lost(run_suite_with):
    result = run_suite_with(
        WRONG_SPLIT_K_BF16, "test_gemm.py", "test_linear_layer and bfloat16 and default and llama-3.1-8b.down"
    )
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "gemm.bfloat16 [llama-3.1-8b.down", "what a correct bfloat16 GEMM makes here", "lost")


def test_softmax_summing_in_bf16_fails_the_accuracy_test(run_suite_with):
    result = run_suite_with(WRONG_SOFTMAX_BF16_SUM, "test_blocks.py", "softmax-bert-large-float32 and not log")
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "block.softmax.out", "what a correct float32 softmax makes here")


def test_layer_norm_with_bf16_statistics_fails_the_accuracy_test(run_suite_with):
    result = run_suite_with(
        WRONG_LAYER_NORM_BF16_STATS, "test_blocks.py", "layer_norm-bert-large-bfloat16 and not residual"
    )
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "block.layer_norm.out", "bits lost")


def test_fused_attention_keeping_its_output_in_bf16_fails(run_suite_with):
    result = run_suite_with(WRONG_SDPA_BF16_ACCUMULATOR, "test_sdpa.py", "float32-plain-64-flash")
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "sdpa.flash.out [B2 H2 Lq64 Lk64 D64, float32", "what a correct float32 attention")
