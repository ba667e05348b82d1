"""Negative controls: the real correctness suite, run against deliberately wrong implementations
(monkeypatched in through a plugin), fails and says which check, by how much, and the tolerance.

Each control runs one suite file of this repository with `--rootdir` at the repository (so suite
membership, conftests and the hypothesis profile are the real ones) on the CPU, in a subprocess:
an in-process run would let pytester unload torch modules between runs, which crashes torch.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "suites" / "correctness"


def wrong_plugin(module: str, attribute: str, wrong: str) -> str:
    """Source of a plugin whose autouse fixture replaces `module.attribute` by the function
    `wrong` (given as source; it may call `original`) for every test of the run. `module` may
    name an object inside a module after a colon ('torch:Tensor')."""
    path, _, inner = module.partition(":")
    return f"""
import importlib, pytest, torch
target = importlib.import_module("{path}")
{f'target = getattr(target, "{inner}")' if inner else ""}


@pytest.fixture(autouse=True)
def deliberately_wrong_implementation(monkeypatch):
    original = getattr(target, "{attribute}")
{textwrap.indent(textwrap.dedent(wrong), "    ")}
    monkeypatch.setattr(target, "{attribute}", wrong)
"""


# Fused SDPA reads a non-contiguous V as if it were contiguous (the class of ROCm/pytorch#3230).
WRONG_SDPA = wrong_plugin(
    "torch.nn.functional",
    "scaled_dot_product_attention",
    """
    def wrong(query, key, value, *args, **kwargs):
        if not torch.backends.cuda.math_sdp_enabled() and not value.is_contiguous():
            value = value.as_strided(value.shape, torch.empty(value.shape).stride(), value.storage_offset())
        return original(query, key, value, *args, **kwargs)
""",
)

WRONG_SCALED_MM = wrong_plugin(
    "torch",
    "_scaled_mm",
    """
    def wrong(*args, **kwargs):
        out = original(*args, **kwargs)
        return (out.float() * 1.02).to(out.dtype)
""",
)

WRONG_FUSED_ADAMW = wrong_plugin(
    "torch",
    "_fused_adamw_",
    """
    def wrong(*args, **kwargs):
        kwargs["lr"] = kwargs["lr"] * 1.01
        return original(*args, **kwargs)
""",
)

# The FP8 GEMM of the reference recipe drops the dequantization scale of its second operand.
WRONG_FP8_LINEAR = wrong_plugin(
    "rocm_validate.workloads.fp8",
    "fp8_mm",
    """
    def wrong(a, b, a_scale_inv, b_scale_inv, *args, **kwargs):
        return original(a, b, a_scale_inv, torch.ones_like(b_scale_inv), *args, **kwargs)
""",
)


# A bf16 GEMM whose epilogue truncates to bf16 instead of rounding: every element within one ulp.
WRONG_GEMM_TRUNCATES = wrong_plugin(
    "torch.nn.functional",
    "linear",
    """
    def wrong(x, weight, bias=None):
        out = original(x, weight, bias)
        if out.dtype != torch.bfloat16:
            return out
        exact = original(x.float(), weight.float(), None if bias is None else bias.float())
        return (exact.contiguous().view(torch.int32) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)
""",
)

# The float -> E4M3 cast rounds one ulp towards zero on every odd pattern (a rounding-mode bug).
WRONG_FP8_CAST = wrong_plugin(
    "torch:Tensor",
    "to",
    """
    def wrong(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        if out.dtype == torch.float8_e4m3fn and self.dtype in (torch.float32, torch.bfloat16):
            bits = out.view(torch.uint8)
            odd = (bits & 1).bool() & ((bits & 0x7F) != 0x7F)
            out = torch.where(odd, bits - 1, bits).view(torch.float8_e4m3fn)
        return out
""",
)

# The FP8 weight-gradient GEMM loses one tile: 1/256 of grad_weight (a 128x128 tile of the GPU size).
WRONG_FP8_TILE = wrong_plugin(
    "rocm_validate.workloads.fp8",
    "fp8_mm",
    """
    def wrong(*args, **kwargs):
        out = original(*args, **kwargs)
        if tuple(out.shape) == (256, 128):
            out = out.clone()
            out[:16, :8] = 0
        return out
""",
)

# Inductor's compiled layers return outputs 1e-4 too large.
WRONG_COMPILE = wrong_plugin(
    "torch",
    "compile",
    """
    def wrong(module, *args, **kwargs):
        compiled = original(module, *args, **kwargs)

        def call(*inputs, **named):
            out = compiled(*inputs, **named)
            return tuple(o * (1 + 1e-4) for o in out) if isinstance(out, tuple) else out * (1 + 1e-4)
        return call
""",
)

# Fused attention (not the math reference) returns 5% too much under autocast. (The layer's
# LayerNorm absorbs most of a 2% error in its output; the attention gradients still show 5%.)
WRONG_FUSED_ATTENTION = wrong_plugin(
    "torch.nn.functional",
    "scaled_dot_product_attention",
    """
    def wrong(*args, **kwargs):
        out = original(*args, **kwargs)
        return out * 1.05 if torch.backends.cuda.flash_sdp_enabled() else out
""",
)


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
        "fp8_linear.out [reference recipe e4m3fn/e5m2, 64x128->256, float32]",
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
    assert_failure_report(result, "fp8_linear.grad_weight [reference recipe", "is below the required 22.5 dB")


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


# The three bugs the suite once reported green (issue: correctness against the truth): a
# normalization kernel 0.1% too large in every precision below float64, the exact GELU computed
# with the tanh approximation, and Inductor-compiled modules leaning 0.2% high.
WRONG_LAYER_NORM_SCALE = wrong_plugin(
    "torch.nn.functional",
    "layer_norm",
    """
    def wrong(x, *args, **kwargs):
        out = original(x, *args, **kwargs)
        if out.dtype == torch.float64:
            return out
        up = [a.float() if torch.is_tensor(a) and a.is_floating_point() else a for a in args]
        return (original(x.float(), *up, **kwargs) * 1.001).to(out.dtype)
""",
)

WRONG_GELU_APPROXIMATION = wrong_plugin(
    "torch.nn.functional",
    "gelu",
    """
    def wrong(x, approximate="none"):
        return original(x, approximate="tanh")
""",
)

WRONG_COMPILE_LEAN = wrong_plugin(
    "torch",
    "compile",
    """
    def wrong(module, *args, **kwargs):
        compiled = original(module, *args, **kwargs)

        def lean(out):
            return (out.double() * 1.002).to(out.dtype) if torch.is_tensor(out) else out

        def call(*inputs, **named):
            out = compiled(*inputs, **named)
            return tuple(lean(o) for o in out) if isinstance(out, tuple) else lean(out)
        return call
""",
)


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
