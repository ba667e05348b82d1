"""The tolerance table: lookup rules on the facts of devices we may not have."""

from __future__ import annotations

import pytest

from rocm_validate.correctness.tolerances import RULES, Tolerance, tolerance_for
from rocm_validate.errors import UnknownCheckError


def test_cuda_flash_uses_pytorchs_factors():
    k = {part: tolerance_for(f"sdpa.flash.{part}", "cuda", "sm_90").k for part in ("out", "grad_q", "grad_k", "grad_v")}
    assert k == {"out": 4, "grad_q": 180, "grad_k": 16, "grad_v": 4}


def test_rocm_aotriton_flash_is_looser_than_cuda():
    k = {
        part: tolerance_for(f"sdpa.flash.{part}", "rocm", "gfx942", "aotriton").k
        for part in ("out", "grad_q", "grad_k")
    }
    assert k == {"out": 6, "grad_q": 360, "grad_k": 45}


def test_rocm_flash_grad_k_factor_grows_with_the_key_sequence():
    assert tolerance_for("sdpa.flash.grad_k", "rocm", "gfx942", "aotriton", seq_k=1023).k == 45
    assert tolerance_for("sdpa.flash.grad_k", "rocm", "gfx942", "aotriton", seq_k=1024).k == 70
    assert tolerance_for("sdpa.flash.grad_k", "rocm", "gfx942", "aotriton", seq_k=4096).k == 190


def test_rocm_ck_flash_has_its_own_factors():
    assert tolerance_for("sdpa.flash.grad_q", "rocm", "gfx942", "ck").k == 855
    assert tolerance_for("sdpa.flash.out", "rocm", "gfx942", "ck").k == 5


def test_an_arch_prefix_rule_applies_only_to_that_arch():
    assert tolerance_for("sdpa.mem_efficient.grad_v", "rocm", "gfx950").k == 16
    assert tolerance_for("sdpa.mem_efficient.grad_v", "rocm", "gfx942").k == 8.5


def test_every_rule_names_its_source():
    assert all(rule.tolerance.source for rule in RULES)


def test_an_unknown_check_is_an_error_listing_the_known_ones():
    with pytest.raises(UnknownCheckError, match=r"sdpa\.flash\.out"):
        tolerance_for("sdpa.flsh.out", "cuda", "sm_90")


def test_a_tolerance_without_a_bound_or_an_sqnr_is_refused():
    with pytest.raises(ValueError, match="found none"):
        Tolerance(k=None)


def test_a_negative_factor_is_refused():
    with pytest.raises(ValueError, match="k must be"):
        Tolerance(k=-1)


def test_every_accuracy_test_on_rocm_allows_the_unmeasured_platforms_factor():
    from rocm_validate.correctness.tolerances import ROCM_FACTOR, RULES

    for check in sorted({rule.check for rule in RULES}):
        accuracy = tolerance_for(check, "rocm", "gfx942", dtype="bfloat16").accuracy
        if accuracy is not None:
            assert accuracy.factor >= ROCM_FACTOR, check


def test_the_gpu_math_kernel_on_packed_sequences_is_predicted_with_its_low_precision_intermediates():
    gpu = tolerance_for("sdpa.math.out", "cuda", "sm_90", dtype="bfloat16").accuracy
    cpu = tolerance_for("sdpa.math.out", "cpu", dtype="bfloat16").accuracy
    assert gpu is not None and cpu is not None
    assert gpu.roundings > cpu.roundings
    assert gpu.factor == cpu.factor
