"""BERT-L pretraining step on packed sequences, as MLPerf BERT-L trains: 48 blocks of 512 tokens
(as many tokens as the unpacked step), 2.0 sequences per block on average, the block-diagonal
attention mask and restarting position ids, bf16 autocast, fused AdamW. Samples are sequences:
samples/s counts every sequence of a block, and the packing factor is recorded beside it."""

from __future__ import annotations

import math

import pytest

from rocm_validate.workloads.packing import TRAINING_PACKS, cycle, packed_mlm_batch, packing_factor
from rocm_validate.workloads.training import STEP_PLANS, TrainingSetup, peak_memory_gib, training_setup

PACKS_PER_STEP = {"full": 48, "tiny": 4}
SEQ_LEN = {"full": 512, "tiny": 32}
MEMORY_GIB = 48


@pytest.fixture(scope="module")
def packed_bert(model_builder, perf_context) -> tuple[TrainingSetup, tuple[tuple[int, ...], ...]]:
    perf_context.require_memory(MEMORY_GIB)
    scale = perf_context.scale
    build = model_builder("bert-large", scale, seq_len=SEQ_LEN[scale])
    packs = cycle(TRAINING_PACKS[scale], PACKS_PER_STEP[scale])
    batch = packed_mlm_batch(packs, build.config.vocab_size, seed=0)
    return training_setup(build, len(packs), batch=batch), packs


def test_bert_large_packed_training_step(perf, packed_bert) -> None:
    setup, packs = packed_bert
    sequences = sum(len(pack) for pack in packs)
    measured = perf.measure(setup.step, **STEP_PLANS[perf.scale])
    prefix = f"train.{setup.label}.packed"
    perf.throughput(f"{prefix}.samples_per_s", measured, sequences, "samples/s")
    perf.throughput(f"{prefix}.model_tflops", measured, setup.flops_per_step, "TFLOP/s", peak="bf16")
    perf.record(f"{prefix}.packing_factor", packing_factor(packs), "sequences/pack", "higher")
    if perf.device.is_gpu:
        perf.record(f"{prefix}.peak_memory", peak_memory_gib(setup.step), "GiB", "lower")
    loss = setup.step().item()
    assert math.isfinite(loss), f"packed BERT-L loss is {loss} after the timed steps"
