"""Optimizers: fused and foreach AdamW against a float64 reference over 20 steps (parameters and
both moments), and apex's FusedLAMB against the reference LAMB when apex is installed."""

from __future__ import annotations

import pytest

from rocm_validate.core.requirements import import_optional
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.optimizers import ADAMW_VARIANTS, check_adamw, check_lamb


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(
    "variant", [pytest.param(v, marks=pytest.mark.rocm_level("quick")) if v == "fused" else v for v in ADAMW_VARIANTS]
)
def test_adamw_matches_the_float64_reference(rocm_device, torch_device, variant, dtype):
    assert_passed(check_adamw(variant, dtype, rocm_device, torch_device))


@pytest.mark.requires_gpu
def test_apex_fused_lamb_matches_the_reference_lamb(rocm_device, torch_device):
    optimizers = import_optional(
        "apex.optimizers", "validate FusedLAMB", "NVIDIA/apex or ROCm/apex built with its CUDA / HIP extensions"
    )

    def make(params, config):
        return optimizers.FusedLAMB(
            params,
            lr=config.lr,
            betas=(config.beta1, config.beta2),
            eps=config.eps,
            weight_decay=config.weight_decay,
            max_grad_norm=config.max_grad_norm,
            use_nvlamb=config.use_nvlamb,
            adam_w_mode=True,
            bias_correction=True,
        )

    assert_passed(check_lamb(make, rocm_device, torch_device))
