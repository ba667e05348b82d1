"""Negative controls: the real correctness suite, run against deliberately wrong implementations
(monkeypatched in through a plugin), fails and says which check, by how much, and the tolerance.

Each control runs one suite file of this repository with `--rootdir` at the repository (so suite
membership, conftests and the hypothesis profile are the real ones) on the CPU, in a subprocess:
an in-process run would let pytester unload torch modules between runs, which crashes torch.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "suites" / "correctness"

def wrong_plugin(module: str, attribute: str, wrong: str) -> str:
    """Source of a plugin whose autouse fixture replaces `module.attribute` by the function
    `wrong` (given as source; it may call `original`) for every test of the run."""
    return f"""
import pytest, torch
import {module} as target


@pytest.fixture(autouse=True)
def deliberately_wrong_implementation(monkeypatch):
    original = getattr(target, "{attribute}")
{textwrap.indent(textwrap.dedent(wrong), "    ")}
    monkeypatch.setattr(target, "{attribute}", wrong)
"""


# Fused SDPA reads a non-contiguous V as if it were contiguous (the class of ROCm/pytorch#3230).
WRONG_SDPA = wrong_plugin("torch.nn.functional", "scaled_dot_product_attention", """
    def wrong(query, key, value, *args, **kwargs):
        if not torch.backends.cuda.math_sdp_enabled() and not value.is_contiguous():
            value = value.as_strided(value.shape, torch.empty(value.shape).stride(), value.storage_offset())
        return original(query, key, value, *args, **kwargs)
""")

WRONG_SCALED_MM = wrong_plugin("torch", "_scaled_mm", """
    def wrong(*args, **kwargs):
        out = original(*args, **kwargs)
        return (out.float() * 1.02).to(out.dtype)
""")

WRONG_FUSED_ADAMW = wrong_plugin("torch", "_fused_adamw_", """
    def wrong(*args, **kwargs):
        kwargs["lr"] = kwargs["lr"] * 1.01
        return original(*args, **kwargs)
""")

# The FP8 GEMM of the reference recipe drops the dequantization scale of its second operand.
WRONG_FP8_LINEAR = wrong_plugin("rocm_validate.workloads.fp8", "fp8_mm", """
    def wrong(a, b, a_scale_inv, b_scale_inv, *args, **kwargs):
        return original(a, b, a_scale_inv, torch.ones_like(b_scale_inv), *args, **kwargs)
""")


@pytest.fixture
def run_suite_with(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Callable[..., pytest.RunResult]:
    """run(wrong, suite_file, keyword): one suite file of this repository with the `wrong` plugin
    active, on the CPU."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # this checkout's rocm_validate, not an installed one

    def run(wrong: str, suite_file: str, keyword: str) -> pytest.RunResult:
        pytester.makepyfile(wrong_implementation=wrong)
        return pytester.runpytest_subprocess(
            str(SUITE / suite_file), "-p", "wrong_implementation", "--rootdir", str(REPO), "-p", "no:cacheprovider",
            "--rocm-device=cpu", "-k", keyword, "-q",
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
    assert_failure_report(result, "sdpa.flash.out [B2 H2 Lq64 Lk64 D64, float32, mask none, V transposed]",
                          "the candidate differs from the golden beyond tolerance", "low-precision reference",
                          "(k = 8)")


def test_scaled_mm_two_percent_off_fails_the_emulation_check(run_suite_with):
    result = run_suite_with(WRONG_SCALED_MM, "test_fp8_gemm.py",
                            "test_scaled_mm_matches_the_emulation_of_its_operands and bert-large.ffn_up-tensorwise-bfloat16")
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "scaled_mm.emulation [e4m3fn tensorwise -> bfloat16, contiguous operands",
                          "ratio", "(k = 4)")


def test_fused_adamw_with_a_wrong_step_size_fails_the_adamw_check(run_suite_with):
    result = run_suite_with(WRONG_FUSED_ADAMW, "test_optimizers.py", "fused-float32 or foreach-float32")
    result.assert_outcomes(failed=1, passed=1)
    assert_failure_report(result, "adamw[fused].param[0] (256, 64) (float32, after 20 steps)", "(k = 4)")


def test_an_fp8_linear_losing_a_scale_fails_the_sqnr_gate(run_suite_with):
    result = run_suite_with(WRONG_FP8_LINEAR, "test_fp8_linear.py", "test_reference_fp8_linear_tracks_nn_linear")
    result.assert_outcomes(failed=1)
    assert_failure_report(result, "fp8_linear.out [reference recipe e4m3fn/e5m2, 64x128->256, float32]",
                          "is below the required 20 dB", "SQNR >= 20 dB")
