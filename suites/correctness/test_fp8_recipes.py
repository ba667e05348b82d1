"""FP8 training recipes as users run them: torchao's float8 training (tensor-wise, row-wise,
row-wise with a high-precision weight gradient) in the device's FP8 formats, Transformer Engine's
(current scaling, delayed scaling, MXFP8 on gfx950 and NVIDIA Blackwell) and the project's delayed-scaling
recipe, each on a Llama-3.1-8B-shaped FFN block and decoder layer (tiny on the CPU) forward and
backward against the block in float64: SQNR of the output and of every gradient, overall and in
its worst 128 x 128 tile, and a few AdamW steps compared on loss. torchao's recipes are also
checked compiled, as users run them, and as single linear layers against nn.Linear.

A recipe whose library is not installed skips, naming `pip install rocm-validate[fp8]`; an
installed library that fails to import or to run fails the test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from rocm_validate.core.requirements import (
    fp8_recipe_skip_reason,
    library_skip_reason,
    requires_gpu,
)
from rocm_validate.correctness.compare import assert_passed
from rocm_validate.correctness.fp8 import (
    RecipeCase,
    check_fp8_layer,
    check_recipe_block,
    check_recipe_training,
    linear_size,
)
from rocm_validate.errors import LibraryMissing
from rocm_validate.platform.libraries import expected_seconds
from rocm_validate.workloads import fp8_recipes
from rocm_validate.workloads.fp8_recipes import BLOCKS, RECIPES, TORCHAO_RECIPES
from rocm_validate.workloads.shapes import training_dtype

LIBRARY_RECIPES = tuple(name for name, recipe in RECIPES.items() if recipe.package)


def _usable(rocm_device: Any, name: str) -> fp8_recipes.Fp8Recipe:
    """The recipe, or a skip saying what this device lacks for it."""
    recipe = RECIPES[name]
    reason = fp8_recipe_skip_reason(rocm_device, recipe)
    if reason:
        pytest.skip(reason)
    return recipe


def _run_or_skip_if_missing(check: Callable[[], Any], recipe: fp8_recipes.Fp8Recipe) -> Any:
    """check(), or a skip naming the extra when the recipe's library is not installed at all."""
    try:
        return check()
    except LibraryMissing as missing:
        pytest.skip(library_skip_reason(missing, f"check {recipe.name}"))


def _case(rocm_device: Any, name: str, kind: str, compiled: bool = False) -> RecipeCase:
    scale = "full" if rocm_device.is_gpu else "tiny"
    return RecipeCase(
        _usable(rocm_device, name),
        kind,
        scale,
        tuple(rocm_device.fp8_formats[:2]),
        training_dtype(rocm_device.backend),
        compiled,
    )


def _check(rocm_device: Any, torch_device: Any, case: RecipeCase, check: Callable[..., Any]) -> None:
    """Run a recipe check on this device and fail with every comparison that failed."""
    found = _run_or_skip_if_missing(lambda: check(case, rocm_device, torch_device), case.recipe)
    assert_passed(found if isinstance(found, list) else [found])


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("kind", BLOCKS)
@pytest.mark.parametrize(
    "check", [check_recipe_block, check_recipe_training], ids=["forward_backward", "training_loss"]
)
def test_fp8_recipe_tracks_the_float64_block(rocm_device, torch_device, check, kind, recipe):
    _check(rocm_device, torch_device, _case(rocm_device, recipe, kind), check)


# A question about the compiler and torchao: one GPU of a node (seconds as a cold compile took on
# the H200: the row-wise recipe compiles the most).
COMPILED_RECIPE_S = {"torchao-tensorwise": 7, "torchao-rowwise": 12, "torchao-rowwise_with_gw_hp": 6}


@pytest.mark.parametrize(
    "recipe",
    [
        pytest.param(r, marks=pytest.mark.rocm_shared(seconds=expected_seconds("torchao", COMPILED_RECIPE_S.get(r, 8))))
        for r in TORCHAO_RECIPES
    ],
)
def test_compiled_torchao_recipe_tracks_the_float64_ffn(rocm_device, torch_device, recipe):
    reason = requires_gpu(rocm_device)
    if reason:
        pytest.skip(f"compiled torchao float8 is checked where users compile it: {reason}")
    try:
        _check(rocm_device, torch_device, _case(rocm_device, recipe, "ffn", compiled=True), check_recipe_block)
    finally:
        torch._dynamo.reset()


@pytest.mark.parametrize("recipe", LIBRARY_RECIPES)
def test_fp8_recipe_linear_tracks_nn_linear(rocm_device, torch_device, recipe):
    chosen = _usable(rocm_device, recipe)
    formats = tuple(rocm_device.fp8_formats[:2])

    def make(linear: torch.nn.Linear) -> torch.nn.Module:
        wrapped = torch.nn.Sequential(linear)
        fp8_recipes.convert(wrapped, chosen, formats)
        return wrapped[0]

    def check() -> Any:
        return check_fp8_layer(
            make,
            chosen.description,
            linear_size(rocm_device.is_gpu),
            training_dtype(rocm_device.backend),
            rocm_device,
            torch_device,
            context=lambda: fp8_recipes.forward_context(chosen),
        )

    assert_passed(_run_or_skip_if_missing(check, chosen))
