"""Llama-3.1-8B-shaped decoder training step: two decoder layers at full width (hidden 4096,
GQA 32/8 heads, MLP 14336, vocabulary 128256), batch 2 x sequence 4096, bf16 autocast, fused
AdamW. Batch 2 keeps the FP8 step GPU-bound on an H100: at batch 1 its host time (delayed scaling
launches many small kernels per cast) matched its GPU time and rounds jittered by 3-11%.

Its FP8 variant swaps every linear layer of the decoder (not the output layer, as FP8 training
recipes keep it in high precision) for `rocm_validate.workloads.fp8.Fp8Linear`: delayed scaling, forward
in the device's E4M3 and gradients in its E5M2 through torch._scaled_mm. The FP8 and bf16 steps
run interleaved on the same parameters, so clock drift cancels in the FP8 speedup.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest

from rocm_validate.core.requirements import scaled_mm_skip_reason
from rocm_validate.workloads.training import (
    STEP_PLANS,
    TrainingSetup,
    peak_memory_gib,
    training_setup,
)

LAYERS = 2
BATCH = {"full": 2, "tiny": 1}
SEQ_LEN = {"full": 4096, "tiny": 32}
MEMORY_GIB = 48
KEPT_IN_HIGH_PRECISION = ("lm_head",)
# Six seconds: ~20 rounds of each step. The FP8 step launches many small kernels, so host
# hiccups show through in single rounds (3-11% round-to-round on the H100) and need averaging.
INTERLEAVED_PLANS = {"full": dict(STEP_PLANS["full"], window_s=6.0), "tiny": STEP_PLANS["tiny"]}


@pytest.fixture(scope="module")
def llama(model_builder, perf_context) -> TrainingSetup:
    perf_context.require_memory(MEMORY_GIB)
    scale = perf_context.scale
    build = model_builder("llama-3.1-8b", scale, num_layers=LAYERS, seq_len=SEQ_LEN[scale])
    return training_setup(build, BATCH[scale])


def _prefix(llama: TrainingSetup) -> str:
    return f"train.{llama.label}-{LAYERS}l"


def _record_step(perf, llama: TrainingSetup, mode: str, measured, step: Callable[[], Any], peak: str) -> None:
    """tokens/s, model TFLOP/s (against the `peak` datasheet figure) and, on a GPU, peak memory of
    one step; then one more step, whose loss must be finite."""
    prefix = f"{_prefix(llama)}.{mode}"
    perf.throughput(f"{prefix}.tokens_per_s", measured, llama.batch_size * llama.build.seq_len, "tokens/s")
    perf.throughput(f"{prefix}.model_tflops", measured, llama.flops_per_step, "TFLOP/s", peak=peak)
    if perf.device.is_gpu:
        perf.record(f"{prefix}.peak_memory", peak_memory_gib(step), "GiB", "lower")
    loss = step().item()
    assert math.isfinite(loss), f"Llama decoder loss ({mode}) is {loss} after the timed steps"


def test_llama_decoder_training_step(perf, llama: TrainingSetup) -> None:
    measured = perf.measure(llama.step, **STEP_PLANS[perf.scale])
    _record_step(perf, llama, "eager", measured, llama.step, peak="bf16")


def _swapped(step: Callable[[], Any], swap: Any) -> Callable[[], Any]:
    """step() with the FP8 layers in place for its duration."""

    def fp8_step() -> Any:
        swap.fp8()
        try:
            return step()
        finally:
            swap.original()

    return fp8_step


def test_llama_decoder_fp8_training_step(perf, rocm_device, llama: TrainingSetup) -> None:
    reason = scaled_mm_skip_reason(rocm_device)
    if reason:
        pytest.skip(f"FP8 training step {reason}")
    from rocm_validate.workloads.fp8 import Fp8LinearSwap

    swap = Fp8LinearSwap(llama.build.model, rocm_device.fp8_formats, keep=KEPT_IN_HIGH_PRECISION)
    assert len(swap) == 7 * LAYERS, f"expected 7 linear layers per decoder layer to swap, found {len(swap)}"
    device = next(llama.build.model.parameters()).device
    assert swap.layers[0].uses_scaled_mm(device), f"FP8 layers would emulate the FP8 GEMM on {device}, not time it"
    fp8_step = _swapped(llama.step, swap)
    measured = perf.measure_interleaved({"bf16": llama.step, "fp8": fp8_step}, **INTERLEAVED_PLANS[perf.scale])
    perf.speedup(f"{_prefix(llama)}.fp8_speedup", measured["fp8"], measured["bf16"])
    _record_step(perf, llama, "fp8", measured["fp8"], fp8_step, peak="fp8")
