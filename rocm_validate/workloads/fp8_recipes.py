"""FP8 training recipes as users run them, each built from a high-precision module.

* torchao's float8 training (`torchao.float8.convert_to_float8_training`): dynamic `tensorwise`
  scaling, `rowwise` scaling (power-of-two scales, E4M3 everywhere) and `rowwise_with_gw_hp`
  (row-wise, with the weight gradient computed in high precision). torchao picks its FP8 dtypes
  once per process from a device check of its own, so the config is rebuilt here with the
  device's formats (`DeviceInfo.fp8_formats`: fnuz on gfx942, OCP elsewhere).
* Transformer Engine: current scaling, delayed scaling and MXFP8 block scaling (gfx950 and NVIDIA
  Blackwell only), its `te.Linear` swapped in for every `nn.Linear` and run under TE's
  FP8 autocast. TE chooses fnuz on gfx942 itself.
* The project's own eager delayed-scaling recipe (`rocm_validate.workloads.fp8.Fp8Linear`), whose
  numerics are written out in full.

An optional library that is not installed raises `LibraryMissing` (a skip that names the
`rocm-validate[fp8]` extra); one that is installed but fails to import or to run raises what it
raised, so a broken install is a failure. The Llama-3.1-8B-shaped blocks the recipes are checked
on (`LlamaBlock`), and the faults planted in them for negative controls, live here too, so the
correctness suite, the perf suite and `benchmarks/fp8_recipes.py` build the same things.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from rocm_validate.platform import libraries
from rocm_validate.workloads import fp8
from rocm_validate.workloads.models import MODELS

EXTRA = "rocm-validate[fp8]"
INSTALL = f"pip install {EXTRA}"


@dataclass(frozen=True)
class Fp8Recipe:
    """One FP8 training recipe: which library runs it and what the device needs for it.

    scaling: the `torch._scaled_mm` scaling its GEMMs use ("tensorwise" or "rowwise"; "" for a
    library with its own GEMMs); archs: arch prefixes it is limited to (MXFP8); needs_gpu: the
    library has no CPU path.
    """

    name: str
    library: str  # "torchao", "transformer_engine" or "rocm_validate"
    variant: str  # the library's own name for the recipe
    description: str
    scaling: str = ""
    archs: tuple[str, ...] = ()
    needs_gpu: bool = False

    @property
    def package(self) -> str:
        """The package to install for it (none for the project's own recipe)."""
        return {"torchao": "torchao", "transformer_engine": "transformer_engine"}.get(self.library, "")


RECIPES: dict[str, Fp8Recipe] = {
    r.name: r
    for r in (
        Fp8Recipe(
            "torchao-tensorwise",
            "torchao",
            "tensorwise",
            "torchao float8, dynamic tensor-wise scaling, E4M3 forward and E5M2 gradients",
            "tensorwise",
        ),
        Fp8Recipe(
            "torchao-rowwise",
            "torchao",
            "rowwise",
            "torchao float8, dynamic row-wise power-of-two scaling, E4M3 throughout",
            "rowwise",
        ),
        Fp8Recipe(
            "torchao-rowwise_with_gw_hp",
            "torchao",
            "rowwise_with_gw_hp",
            "torchao float8, row-wise scaling with the weight gradient in high precision",
            "rowwise",
        ),
        Fp8Recipe(
            "te-current",
            "transformer_engine",
            "current",
            "Transformer Engine Float8CurrentScaling (HYBRID: E4M3 forward, E5M2 gradients)",
            needs_gpu=True,
        ),
        Fp8Recipe(
            "te-delayed",
            "transformer_engine",
            "delayed",
            "Transformer Engine DelayedScaling (HYBRID, amax history 16, max)",
            needs_gpu=True,
        ),
        Fp8Recipe(
            "te-mxfp8",
            "transformer_engine",
            "mxfp8",
            "Transformer Engine MXFP8BlockScaling (32-element blocks, E8M0 scales)",
            archs=("gfx950", "sm_100", "sm_103", "sm_120", "sm_121"),
            needs_gpu=True,
        ),
        Fp8Recipe(
            "project-delayed",
            "rocm_validate",
            "delayed",
            "rocm_validate's eager delayed-scaling Fp8Linear (E4M3 forward, E5M2 gradients)",
        ),
    )
}
TORCHAO_RECIPES = tuple(name for name, r in RECIPES.items() if r.library == "torchao")
TE_RECIPES = tuple(name for name, r in RECIPES.items() if r.library == "transformer_engine")
PROJECT_RECIPE = "project-delayed"


def fp8_recipe(name: str) -> Fp8Recipe:
    """The recipe called `name`; ValueError naming the known ones otherwise."""
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(f"unknown FP8 recipe {name!r}; known: {', '.join(RECIPES)}") from None


def import_library(module: str) -> ModuleType:
    """Import `module` of an optional FP8 library (`platform.libraries.import_library`), naming
    the [fp8] extra when it is not installed."""
    return libraries.import_library(module, INSTALL)


# ---------------------------------------------------------------------------------------------
# Building a recipe's module from a high-precision one.


def _is_e4m3(dtype: torch.dtype) -> bool:
    return "e4m3" in str(dtype)


def torchao_config(variant: str, formats: tuple[str, ...]) -> Any:
    """torchao's `Float8LinearConfig` for `variant`, its every cast retargeted to the device's
    formats: E4M3 casts to formats[0], E5M2 casts to formats[1] (fnuz on gfx942, OCP elsewhere)."""
    config_module = import_library("torchao.float8.config")
    forward_fmt, gradient_fmt = fp8.check_formats(formats)
    base = config_module.Float8LinearConfig.from_recipe_name(variant)
    casts = {}
    for field in dataclasses.fields(base):
        if field.name.startswith("cast_config_"):
            cast = getattr(base, field.name)
            target = forward_fmt.dtype if _is_e4m3(cast.target_dtype) else gradient_fmt.dtype
            casts[field.name] = dataclasses.replace(cast, target_dtype=target)
    return dataclasses.replace(base, **casts)


def te_recipe(variant: str) -> Any:
    """Transformer Engine's recipe object for `variant` ('current', 'delayed' or 'mxfp8')."""
    recipe = import_library("transformer_engine.common.recipe")
    if variant == "current":
        return recipe.Float8CurrentScaling(fp8_format=recipe.Format.HYBRID)
    if variant == "delayed":
        return recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    if variant == "mxfp8":
        return recipe.MXFP8BlockScaling()
    raise ValueError(f"unknown Transformer Engine recipe {variant!r}; known: current, delayed, mxfp8")


def _linear_slots(module: torch.nn.Module, keep: tuple[str, ...]) -> list[tuple[torch.nn.Module, str, torch.nn.Linear]]:
    """(parent, attribute, linear) for every nn.Linear inside `module` not named in `keep`."""
    if type(module) is torch.nn.Linear:
        raise ValueError("FP8 conversion replaces the layers inside a model; wrap a lone nn.Linear first")
    slots = []
    for parent_name, parent in module.named_modules():
        for name, child in parent.named_children():
            qualified = f"{parent_name}.{name}" if parent_name else name
            if type(child) is torch.nn.Linear and qualified not in keep:
                slots.append((parent, name, child))
    return slots


def _te_linear(te: ModuleType, linear: torch.nn.Linear) -> torch.nn.Module:
    """A te.Linear holding a copy of `linear`'s parameters (TE owns its parameters)."""
    layer = te.Linear(
        linear.in_features,
        linear.out_features,
        bias=linear.bias is not None,
        params_dtype=linear.weight.dtype,
        device=linear.weight.device,
    )
    with torch.no_grad():
        layer.weight.copy_(linear.weight)
        if linear.bias is not None:
            layer.bias.copy_(linear.bias)
    return layer


def convert(
    module: torch.nn.Module,
    recipe: Fp8Recipe,
    formats: tuple[str, ...],
    keep: tuple[str, ...] = (),
    matmul: str = "auto",
) -> int:
    """Replace, in place, every nn.Linear inside `module` (except those named in `keep`) by the
    recipe's FP8 linear; return how many were replaced. torchao's and the project's layers share
    the original parameters; Transformer Engine's hold copies. Run the module's forward under
    `forward_context(recipe)`. `matmul` is the project recipe's GEMM (`fp8.Fp8Linear`)."""
    slots = _linear_slots(module, keep)
    if recipe.library == "torchao":
        chosen = {id(linear) for _, _, linear in slots}
        import_library("torchao.float8").convert_to_float8_training(
            module, config=torchao_config(recipe.variant, formats), module_filter_fn=lambda m, _fqn: id(m) in chosen
        )
    elif recipe.library == "transformer_engine":
        te = import_library("transformer_engine.pytorch")
        for parent, name, linear in slots:
            setattr(parent, name, _te_linear(te, linear))
    else:
        for parent, name, linear in slots:
            setattr(parent, name, fp8.Fp8Linear.from_linear(linear, formats, matmul=matmul))
    return len(slots)


def forward_context(recipe: Fp8Recipe) -> AbstractContextManager[Any]:
    """What the converted module's forward runs under: Transformer Engine's FP8 autocast with the
    recipe; nothing for torchao and the project's recipe (their layers always compute in FP8)."""
    if recipe.library != "transformer_engine":
        return contextlib.nullcontext()
    te = import_library("transformer_engine.pytorch")
    if hasattr(te, "autocast"):  # TE 2.8+; fp8_autocast is its deprecated spelling
        return te.autocast(enabled=True, recipe=te_recipe(recipe.variant))
    return te.fp8_autocast(enabled=True, fp8_recipe=te_recipe(recipe.variant))


def parameter_sharing_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of `model`'s module tree that shares every parameter and buffer with it: converting
    the copy leaves the original as it was, and one optimizer over the original's parameters
    trains both (where the converter shares parameters, as torchao's and the project's do)."""
    shared = {id(t): t for t in (*model.parameters(), *model.buffers())}
    return copy.deepcopy(model, memo=shared)


# ---------------------------------------------------------------------------------------------
# Llama-3.1-8B-shaped blocks the recipes are checked on.

BLOCKS = ("ffn", "decoder")


@dataclass(frozen=True)
class BlockSize:
    """Batch x sequence of hidden states through one block of a Llama config."""

    batch: int
    seq: int

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


def block_size(scale: str) -> BlockSize:
    """2 x 1024 tokens at full scale (a GPU: the shape registry's 2048 GEMM rows), 2 x 32 tiny."""
    return BlockSize(2, 1024) if scale == "full" else BlockSize(2, 32)


def llama_config(scale: str) -> Any:
    """Llama-3.1-8B's LlamaConfig ('full': hidden 4096, GQA 32/8 heads, MLP 14336) or its CPU-sized
    'tiny' twin, with SDPA attention."""
    import transformers

    config: Any = transformers.LlamaConfig  # Any: its typed signature leaves out attn_implementation
    return config(attn_implementation="sdpa", **MODELS["llama-3.1-8b"].config_kwargs(scale))


class LlamaBlock(torch.nn.Module):
    """One Llama FFN (SwiGLU MLP: gate, up, down projections) or one whole decoder layer (RMSNorm,
    GQA attention with rotary embeddings, RMSNorm, MLP, residuals) as hidden states -> hidden
    states, from transformers' own modules."""

    def __init__(self, kind: str, config: Any) -> None:
        super().__init__()
        from transformers.models.llama import modeling_llama

        if kind not in BLOCKS:
            raise ValueError(f"unknown Llama block {kind!r}; known: {', '.join(BLOCKS)}")
        self.kind = kind
        self.hidden_size: int = config.hidden_size
        self.block: torch.nn.Module
        if kind == "ffn":
            self.block = modeling_llama.LlamaMLP(config)
        else:
            self.block = modeling_llama.LlamaDecoderLayer(config, layer_idx=0)
            self.rotary = modeling_llama.LlamaRotaryEmbedding(config)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.kind == "ffn":
            return self.block(hidden)
        positions = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0)
        out = self.block(hidden, position_ids=positions, position_embeddings=self.rotary(hidden, positions))
        return out[0] if isinstance(out, tuple) else out  # transformers < 5 returns a tuple


def llama_block(kind: str, scale: str, device: torch.device | str, seed: int = 0) -> LlamaBlock:
    """A Llama block in float32, built on `device`, linear weights drawn N(0, 0.02) as Llama
    initialises them (config.initializer_range), RMSNorm weights 1; seeded without touching the
    global RNG."""
    config = llama_config(scale)
    target = torch.device(device)
    with torch.random.fork_rng(devices=[target] if target.type == "cuda" else []), target:
        torch.manual_seed(seed)  # built on the device: a full-size decoder layer is 218M weights
        block = LlamaBlock(kind, config)
        for module in block.modules():
            if isinstance(module, torch.nn.Linear):
                torch.nn.init.normal_(module.weight, std=config.initializer_range)
    return block


# ---------------------------------------------------------------------------------------------
# Faults planted in a converted block, for negative controls and for measuring the gates' margin.

TILE = 128


def zero_gradient_tile(parameter: torch.Tensor, row: int = 0, col: int = 0, tile: int = TILE) -> Any:
    """Zero one tile x tile block of `parameter`'s gradient whenever it is computed (the class of
    a GEMM that drops a tile of its stores); returns the hook handle (`.remove()` undoes it)."""

    def zero_tile(grad: torch.Tensor) -> torch.Tensor:
        grad = grad.clone()
        grad[row : row + tile, col : col + tile] = 0
        return grad

    return parameter.register_hook(zero_tile)


def scale_output(module: torch.nn.Module, factor: float) -> Any:
    """Multiply `module`'s output by `factor` (a wrong epilogue scale); returns the hook handle."""
    return module.register_forward_hook(lambda _module, _args, out: out * factor)


FAULTS = ("zeroed-grad-tile", "output-x0.92", "weight-scale-x2")


def first_weight(block: torch.nn.Module) -> tuple[str, torch.nn.Parameter]:
    """The block's first matrix parameter (gate_proj in an FFN, q_proj in a decoder layer)."""
    return next((name, p) for name, p in block.named_parameters() if p.dim() == 2)


def plant_fault(fault: str, block: torch.nn.Module, recipe: Fp8Recipe) -> AbstractContextManager[Any]:
    """A context in which `block` (converted to `recipe`) has `fault`: 'zeroed-grad-tile' (the
    first 128 x 128 tile of its first weight's gradient zeroed), 'output-x0.92' (its output
    scaled by 0.92) or 'weight-scale-x2' (the recipe dequantizes weights with a scale 2x off)."""
    if fault == "weight-scale-x2":
        return wrong_weight_scale(recipe, 2.0)
    if fault == "zeroed-grad-tile":
        handle = zero_gradient_tile(first_weight(block)[1])
    elif fault == "output-x0.92":
        handle = scale_output(block, 0.92)
    else:
        raise ValueError(f"unknown planted fault {fault!r}; known: {', '.join(FAULTS)}")
    return _removing(handle)


@contextlib.contextmanager
def _removing(handle: Any) -> Iterator[None]:
    try:
        yield
    finally:
        handle.remove()


@contextlib.contextmanager
def wrong_weight_scale(recipe: Fp8Recipe, factor: float = 2.0) -> Iterator[None]:
    """While active, the recipe dequantizes its FP8 weights with a scale `factor` times off (the
    scale used to quantize stays right): the bug of a recipe that mixes up its scale and inverse.
    Implemented for torchao and the project's recipe; Transformer Engine keeps its scales in C++."""
    target: Any
    planted: Callable[..., Any]
    if recipe.library == "torchao":
        target = import_library("torchao.float8.float8_linear")
        roles = import_library("torchao.float8.float8_training_tensor").GemmInputRole
        original: Callable[..., Any] = target.hp_tensor_to_float8_dynamic

        def planted_dynamic(*args: Any, **kwargs: Any) -> Any:
            cast = original(*args, **kwargs)
            if kwargs.get("gemm_input_role") is roles.WEIGHT:
                cast._scale = cast._scale / factor  # dequantization divides by _scale
            return cast

        planted, attribute = planted_dynamic, "hp_tensor_to_float8_dynamic"
    elif recipe.library == "rocm_validate":
        target = fp8.ScalingState
        original = target.cast

        def planted_cast(self: fp8.ScalingState, x: torch.Tensor, role: int, fmt: fp8.Fp8Format) -> Any:
            x_fp8, inverse = original(self, x, role, fmt)
            return x_fp8, inverse * factor if role == fp8.ROLES.index("weight") else inverse

        planted, attribute = planted_cast, "cast"
    else:
        raise ValueError(
            f"a wrong weight scale can be planted in torchao's and the project's recipes, not {recipe.name}"
        )
    setattr(target, attribute, planted)
    try:
        yield
    finally:
        setattr(target, attribute, original)
