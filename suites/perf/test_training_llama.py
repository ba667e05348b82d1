"""Llama-3.1-8B-shaped decoder training step: two decoder layers at full width (hidden 4096,
GQA 32/8 heads, MLP 14336, vocabulary 128256), sequence 4096, bf16 autocast, fused AdamW.

The FP8 variant waits for an FP8 linear layer: PyTorch alone has none (torchao and
Transformer Engine are not dependencies), see docs/perf.md.
"""

from __future__ import annotations

import math

import pytest

from rocm_validate.perf_steps import STEP_PLANS, TrainingSetup, peak_memory_gib, training_setup

LAYERS = 2
BATCH = {"full": 1, "tiny": 1}
SEQ_LEN = {"full": 4096, "tiny": 32}
MEMORY_GIB = 48


@pytest.fixture(scope="module")
def llama(model_builder, perf_context) -> TrainingSetup:
    perf_context.require_memory(MEMORY_GIB)
    scale = perf_context.scale
    build = model_builder("llama-3.1-8b", scale, num_layers=LAYERS, seq_len=SEQ_LEN[scale])
    return training_setup(build, BATCH[scale])


def test_llama_decoder_training_step(perf, llama: TrainingSetup) -> None:
    measured = perf.measure(llama.step, **STEP_PLANS[perf.scale])
    prefix = f"train.{llama.label}-{LAYERS}l.eager"
    perf.throughput(f"{prefix}.tokens_per_s", measured, llama.batch_size * llama.build.seq_len, "tokens/s")
    perf.throughput(f"{prefix}.model_tflops", measured, llama.flops_per_step, "TFLOP/s", peak="bf16")
    if perf.device.is_gpu:
        perf.record(f"{prefix}.peak_memory", peak_memory_gib(llama.step), "GiB", "lower")
    loss = llama.step().item()
    assert math.isfinite(loss), f"Llama decoder loss is {loss} after the timed steps"
