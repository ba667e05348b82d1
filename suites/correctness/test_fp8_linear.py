"""The project's delayed-scaling FP8 linear against nn.Linear (history rolled exactly, scale =
fp8_max / amax / 2^margin; output >= 20 dB SQNR, input and weight gradients >= 17 dB), through
`_scaled_mm` and its emulation, and swapped into a tiny Llama. torchao's and Transformer Engine's
FP8 linears are checked with their recipes in test_fp8_recipes.py."""

from __future__ import annotations

import math

import pytest
import torch

from rocm_validate.core.requirements import fp8_skip_reason, scaled_mm_skip_reason
from rocm_validate.correctness.compare import assert_passed, compare, sqnr_db
from rocm_validate.correctness.fp8 import (
    check_fp8_layer,
    check_fp8_linear_paths,
    linear_size,
)
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.workloads import fp8
from rocm_validate.workloads.shapes import training_dtype


@pytest.fixture
def fp8_formats(rocm_device):
    reason = fp8_skip_reason(rocm_device)
    if reason:
        pytest.skip(reason)
    return tuple(rocm_device.fp8_formats[:2])


def test_delayed_scaling_rolls_the_amax_history_exactly(torch_device, fp8_formats):
    """Amaxes that are powers of two make every scale exact, so history and scales are compared
    bitwise with a plain-Python model of the recipe, including amax 0, Inf and NaN."""
    fmt = fp8.fp8_format(fp8_formats[0])
    recipe = fp8.DelayedScaling(history_len=4, margin=1)
    state = fp8.ScalingState(recipe, roles=1, device=torch_device)
    amaxes = [2.0, 8.0, 0.5, 32.0, 0.25, 1.0, 0.0, math.inf, math.nan, 4.0, 2.0, 1.0, 0.5]
    window: list[float] = [0.0] * recipe.history_len
    scale = 1.0
    for step, amax in enumerate(amaxes):
        x = (
            torch.tensor([amax, -amax / 2, 0.0], device=torch_device)
            if math.isfinite(amax)
            else torch.tensor([amax, 1.0], device=torch_device)
        )
        used = float(state.scale[0])
        state.cast(x, 0, fmt)
        assert used == scale, f"step {step}: the cast used scale {used}, the recipe says {scale}"
        window[0] = amax
        reduced = math.nan if any(math.isnan(a) for a in window) else max(window)
        good = math.isfinite(reduced) and reduced > 0
        scale = fmt.max / reduced / 2**recipe.margin if good else 1.0
        window = window[1:] + window[:1]
        window[0] = 0.0
        expected = torch.tensor(window, dtype=torch.float64).reshape(-1, 1)
        assert_passed(
            [
                compare(
                    f"fp8.delayed_scaling history after step {step}",
                    state.amax_history,
                    expected,
                    tolerance_for("fp8.cast", "*"),
                )
            ]
        )


def test_reference_fp8_linear_tracks_nn_linear(rocm_device, torch_device, fp8_formats):
    results = check_fp8_layer(
        lambda linear: fp8.Fp8Linear.from_linear(linear, fp8_formats),
        f"own recipe {'/'.join(fp8_formats)}",
        linear_size(rocm_device.is_gpu),
        training_dtype(rocm_device.backend),
        rocm_device,
        torch_device,
    )
    assert_passed(results)


def test_reference_fp8_linear_through_scaled_mm_matches_its_emulation(rocm_device, torch_device, fp8_formats):
    reason = scaled_mm_skip_reason(rocm_device, "tensorwise", "bfloat16")
    if reason:
        pytest.skip(reason)
    results = check_fp8_linear_paths(
        fp8_formats,
        linear_size(rocm_device.is_gpu),
        training_dtype(rocm_device.backend),
        rocm_device,
        torch_device,
    )
    assert_passed(results)


def test_converting_a_tiny_llama_to_fp8_keeps_its_logits(rocm_device, torch_device, fp8_formats, model_builder):
    build = model_builder("llama-3.1-8b", scale="tiny", seed=0)
    batch = build.make_batch(2, seed=1)
    with torch.no_grad():
        before = build.model(**batch).logits.float()
    linears = sum(isinstance(m, torch.nn.Linear) for m in build.model.modules())
    replaced = fp8.convert_to_fp8_linear(build.model, fp8_formats)
    assert replaced == linears, f"replaced {replaced} of {linears} nn.Linear layers"
    assert not any(type(m) is torch.nn.Linear for m in build.model.modules())
    with torch.no_grad():
        after = build.model(**batch).logits.float()
    assert sqnr_db(before, after) >= 15.0, f"FP8 logits SQNR {sqnr_db(before, after):.1f} dB < 15 dB against bf16/fp32"
