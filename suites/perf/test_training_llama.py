"""Llama-3.1-8B-shaped decoder training step: two decoder layers at full width (hidden 4096,
GQA 32/8 heads, MLP 14336, vocabulary 128256), batch 2 x sequence 4096, bf16 autocast, fused
AdamW. Batch 2 keeps the FP8 step GPU-bound on an H100: at batch 1 its host time (delayed scaling
launches many small kernels per cast) matched its GPU time and rounds jittered by 3-11%.

FP8 speedup as users get it: the step with torchao's float8 training (each recipe, in the
device's FP8 formats) under torch.compile against the bf16 step under torch.compile, and
Transformer Engine's step where TE is installed, each interleaved with the compiled bf16 step
(`train.llama-3.1-8b-2l.<recipe>.fp8_speedup`), at the extended level (cold compiles). Every linear layer of the decoder is FP8; the
output layer stays in high precision, as FP8 training recipes keep it.

The project's eager delayed-scaling recipe (`rocm_validate.workloads.fp8.Fp8Linear`) is timed too,
against the eager bf16 step, under its original names (`train.llama-3.1-8b-2l.fp8.*` and
`.fp8_speedup`): its numerics are written out in full, and it is a regression check of `_scaled_mm` and the FP8
casts at training shapes, not the FP8 speedup of the stack (0.87x on the H100: eager casts).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rocm_validate.core.requirements import (
    fp8_recipe_skip_reason,
    library_skip_reason,
    scaled_mm_skip_reason,
)
from rocm_validate.errors import LibraryMissing
from rocm_validate.platform.libraries import expected_seconds
from rocm_validate.workloads.fp8_recipes import (
    RECIPES,
    TE_RECIPES,
    TORCHAO_RECIPES,
    Fp8Recipe,
)
from rocm_validate.workloads.training import (
    STEP_PLANS,
    TrainingSetup,
    peak_memory_gib,
    training_setup,
    training_step,
)

LAYERS = 2
BATCH = {"full": 2, "tiny": 1}
SEQ_LEN = {"full": 4096, "tiny": 32}
MEMORY_GIB = 48
KEPT_IN_HIGH_PRECISION = ("lm_head",)
# Six seconds: ~20 rounds of each step. The FP8 step launches many small kernels (about 2,000 ops
# per step), so host hiccups show through in single rounds and need averaging.
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


# ---------------------------------------------------------------------------------------------
# FP8 as users run it: torchao under torch.compile, Transformer Engine, against compiled bf16.


@pytest.fixture(scope="module")
def compiled_step(llama: TrainingSetup) -> Iterator[Callable[[], Any]]:
    """The bf16 step with the model under torch.compile, compiled by its first call."""
    import torch

    step = training_step(torch.compile(llama.build.model), llama.batch, llama.optimizer)
    step()
    yield step
    torch._dynamo.reset()


def _fp8_twin(rocm_device, llama: TrainingSetup, name: str) -> tuple[Fp8Recipe, Any]:
    """A copy of the model sharing its parameters, with the recipe's FP8 linears; or a skip
    saying what the device or the installation lacks."""
    from rocm_validate.workloads.fp8_recipes import convert, parameter_sharing_copy

    recipe = RECIPES[name]
    reason = fp8_recipe_skip_reason(rocm_device, recipe)
    if reason:
        pytest.skip(f"FP8 training step {reason}")
    twin = parameter_sharing_copy(llama.build.model)
    try:
        replaced = convert(twin, recipe, rocm_device.fp8_formats, keep=KEPT_IN_HIGH_PRECISION)
    except LibraryMissing as missing:
        pytest.skip(library_skip_reason(missing, f"time {name}"))
    assert replaced == 7 * LAYERS, f"expected 7 linear layers per decoder layer to convert, found {replaced}"
    return recipe, twin


def _compare_with_compiled_bf16(
    perf, llama: TrainingSetup, name: str, fp8_step: Callable[[], Any], compiled_step: Callable[[], Any]
) -> None:
    """Time the FP8 step interleaved with the compiled bf16 step; record the speedup and its figures."""
    fp8_step()  # compiles, where the model is compiled, before the timing's warm-up
    measured = perf.measure_interleaved({"bf16": compiled_step, "fp8": fp8_step}, **INTERLEAVED_PLANS[perf.scale])
    perf.speedup(f"{_prefix(llama)}.{name}.fp8_speedup", measured["fp8"], measured["bf16"])
    _record_step(perf, llama, name, measured["fp8"], fp8_step, peak="fp8")


@pytest.mark.requires_gpu
@pytest.mark.rocm_level("extended")  # with the compiled FP8 steps, which time it again beside theirs
@pytest.mark.rocm_shared(seconds=19, group="llama-compiled")  # the stack's compiler: one GPU of a node
def test_llama_decoder_compiled_training_step(perf, llama: TrainingSetup, compiled_step) -> None:
    measured = perf.measure(compiled_step, **STEP_PLANS[perf.scale])
    _record_step(perf, llama, "compiled", measured, compiled_step, peak="bf16")


# The compiled FP8 steps (torchao's recipes, each against the compiled bf16 step, 26-45 s cold on
# the H200, and Transformer Engine's against the same compiled bf16 step) run at the extended
# level: at the standard level they were a whole-node run's longest shared test, and a node with no
# baseline for them validated nothing with that time. The standard level keeps the eager FP8 step
# (per GPU, above), the FP8 GEMMs (test_gemm.py) and the compiled torchao recipes' numerics
# (correctness/test_fp8_recipes.py).
# Where a recipe's library is missing its step skips at once: the node's shared work is divided
# by what will run.
TORCHAO_STEP_S = expected_seconds("torchao", 33)  # with the compiled bf16 step (26-44 s cold, H200)
TE_STEP_S = expected_seconds("transformer_engine", 10)


@pytest.mark.requires_gpu
@pytest.mark.rocm_level("extended")
@pytest.mark.rocm_shared(seconds=TORCHAO_STEP_S, group="llama-compiled")
@pytest.mark.parametrize("recipe", TORCHAO_RECIPES)
def test_llama_decoder_torchao_fp8_training_step(
    perf, rocm_device, llama: TrainingSetup, compiled_step, recipe: str
) -> None:
    import torch

    _, twin = _fp8_twin(rocm_device, llama, recipe)
    fp8_step = training_step(torch.compile(twin), llama.batch, llama.optimizer)
    _compare_with_compiled_bf16(perf, llama, recipe, fp8_step, compiled_step)


class _Optimizers:
    """Optimizers stepped as one: the model's (for the parameters TE shares) and TE's own."""

    def __init__(self, *optimizers: Any) -> None:
        self.optimizers = optimizers

    def step(self) -> None:
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)


@pytest.mark.requires_gpu
@pytest.mark.rocm_level("extended")
@pytest.mark.rocm_shared(seconds=TE_STEP_S, group="llama-compiled")
@pytest.mark.parametrize("recipe", TE_RECIPES)
def test_llama_decoder_transformer_engine_fp8_training_step(
    perf, rocm_device, llama: TrainingSetup, compiled_step, recipe: str
) -> None:
    """Eager, as Transformer Engine runs; its linears hold copies of the weights, so they get an
    AdamW of their own beside the model's (which skips the unused originals)."""
    import torch

    from rocm_validate.workloads.fp8_recipes import forward_context

    chosen, twin = _fp8_twin(rocm_device, llama, recipe)
    shared = {id(p) for p in llama.build.model.parameters()}
    own = [p for p in twin.parameters() if id(p) not in shared]
    optimizer = _Optimizers(llama.optimizer, torch.optim.AdamW(own, lr=llama.optimizer.defaults["lr"], fused=True))

    class UnderRecipe(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = twin

        def forward(self, **batch: Any) -> Any:
            with forward_context(chosen):
                return self.inner(**batch)

    _compare_with_compiled_bf16(
        perf, llama, recipe, training_step(UnderRecipe(), llama.batch, optimizer), compiled_step
    )
