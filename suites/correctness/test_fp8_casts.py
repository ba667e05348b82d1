"""FP8 casts on the device, bit for bit against the formats' definitions: every pattern, rounding
to nearest even, overflow, infinities, NaN and the sign of zero (fnuz: one NaN, no -0)."""

from __future__ import annotations

import math

import pytest

from rocm_validate.core.requirements import fp8_skip_reason
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.fp8 import (
    check_bit_patterns,
    check_rounding,
    check_saturating_quantize,
    special_casts,
)
from rocm_validate.workloads import fp8

ROLES = {"forward": 0, "gradient": 1}


@pytest.fixture(params=list(ROLES))
def fp8_format(request, rocm_device):
    """The device's forward (E4M3) and gradient (E5M2) formats, from DeviceInfo.fp8_formats."""
    reason = fp8_skip_reason(rocm_device)
    if reason:
        pytest.skip(reason)
    return fp8.fp8_format(rocm_device.fp8_formats[ROLES[request.param]])


@pytest.mark.rocm_level("quick")
def test_every_bit_pattern_decodes_and_round_trips(torch_device, fp8_format):
    assert_passed(check_bit_patterns(fp8_format, torch_device))


@pytest.mark.parametrize("source_dtype", ["float32", "bfloat16"])
def test_casts_round_to_nearest_even(torch_device, fp8_format, source_dtype):
    assert_passed([check_rounding(fp8_format, source_dtype, torch_device)])


def test_overflow_infinities_and_nan_follow_the_format(torch_device, fp8_format):
    found = special_casts(fp8_format, torch_device)
    wrong = [
        f"{c.value!r} -> {c.result!r} (bits 0x{c.bits:02x}); allowed: "
        + ("NaN (0x80 in fnuz)" if math.isnan(c.value) else fp8.overflow_description(fp8_format, math.isinf(c.value)))
        for c in found
        if not c.allowed
    ]
    assert not wrong, f"fp8.cast [{fp8_format.name}: special values]: " + "; ".join(wrong)


def test_the_recipe_cast_saturates_at_the_format_max(torch_device, fp8_format):
    assert_passed([check_saturating_quantize(fp8_format, torch_device)])
