"""FP8 checks on a device: casts, torch._scaled_mm, FP8 linear layers and FP8 training recipes.

Casts are compared bit for bit with the pure-Python model of `rocm_validate.workloads.fp8`. `_scaled_mm` is
compared with the float64 emulation of the same FP8 operands (golden) measured against the float32
emulation (reference), and with the unquantized product for SQNR. FP8 linear layers (the
project's delayed-scaling recipe, torchao's, Transformer Engine's) are compared with nn.Linear in
float64 by SQNR, after warm-up steps that fill the delayed-scaling history. The training recipes
of `rocm_validate.workloads.fp8_recipes` run a Llama-3.1-8B-shaped FFN block or decoder layer
forward and backward against the block in float64 (SQNR of the output and of every gradient,
overall and in its worst 128 x 128 tile, the training-dtype block as the reference), and train
it a few steps, compared on loss.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, cast

import torch

from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads import fp8, fp8_recipes
from rocm_validate.workloads.fp8 import Fp8Format
from rocm_validate.workloads.fp8_recipes import Fp8Recipe
from rocm_validate.workloads.shapes import GemmProblem

LAYOUTS = ("contiguous", "sliced", "row-offset")


def _canonical_bits(bits: torch.Tensor, fmt: Fp8Format) -> torch.Tensor:
    """Bit patterns as float64, every NaN pattern folded into the format's canonical NaN."""
    values = bits.cpu().view(fmt.dtype).float()
    return torch.where(torch.isnan(values), float(fp8.nan_bits(fmt)), bits.cpu().double())


def check_bit_patterns(fmt: Fp8Format, torch_device: torch.device) -> list[Comparison]:
    """Upcast of all 256 patterns on the device vs the pure-Python decoding (values and signs of
    zero), then the round trip value -> FP8 on the device must give the pattern back."""
    exact = tolerance_for("fp8.cast", "*")
    patterns = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    golden = torch.tensor(fp8.all_values(fmt), dtype=torch.float64)
    upcast = patterns.to(torch_device).view(fmt.dtype).float()
    signs = torch.where(torch.isnan(golden), math.nan, torch.signbit(upcast.cpu()).double())
    golden_signs = torch.where(torch.isnan(golden), math.nan, torch.signbit(golden).double())
    back = upcast.to(fmt.dtype).view(torch.uint8)
    return [
        compare(f"fp8.cast [{fmt.name}: upcast of all 256 bit patterns]", upcast, golden, exact),
        compare(f"fp8.cast [{fmt.name}: sign of every decoded pattern]", signs, golden_signs, exact),
        compare(
            f"fp8.cast [{fmt.name}: round trip of all 256 bit patterns, as bits]",
            _canonical_bits(back, fmt),
            _canonical_bits(patterns, fmt),
            exact,
        ),
    ]


def check_rounding(fmt: Fp8Format, source_dtype: str, torch_device: torch.device) -> Comparison:
    """Casting from `source_dtype` rounds to nearest, ties to even: every representable value,
    midpoint and quarter point in +-max, plus -0 and tiny negatives (-0 in OCP, +0 in fnuz)."""
    probes = fp8.rounding_probes(fmt) + [-0.0, -fmt.min_subnormal / 4, -fmt.min_subnormal / 2]
    source = torch.tensor(probes, dtype=torch.float64).to(getattr(torch, source_dtype))
    if not torch.equal(source.double(), torch.tensor(probes, dtype=torch.float64)):
        raise ValueError(f"{source_dtype} cannot hold every {fmt.name} rounding probe exactly")
    got = source.to(torch_device).to(fmt.dtype).view(torch.uint8)
    expected = torch.tensor([fp8.encode(p, fmt) for p in probes], dtype=torch.int32).to(torch.uint8)
    return compare(
        f"fp8.cast [{fmt.name} from {source_dtype}: round to nearest even, {len(probes)} probes]",
        _canonical_bits(got, fmt),
        _canonical_bits(expected, fmt),
        tolerance_for("fp8.cast", "*"),
    )


@dataclass(frozen=True)
class SpecialCast:
    value: float
    result: float
    bits: int
    allowed: bool


def special_casts(fmt: Fp8Format, device: torch.device | str) -> list[SpecialCast]:
    """Plain casts of overflowing values, +-inf and NaN on the device, each judged by the format's
    rules: a sign kept, +-max or NaN (or +-inf in e5m2), never another finite value; NaN stays
    NaN, and in fnuz it is the one NaN, 0x80."""
    values = [2 * fmt.max, -2 * fmt.max, 1e30, -1e30, math.inf, -math.inf, math.nan]
    bits = torch.tensor(values, dtype=torch.float32).to(device).to(fmt.dtype).view(torch.uint8).cpu().tolist()
    found = []
    for value, pattern in zip(values, bits):
        result = fp8.decode(pattern, fmt)
        if math.isnan(value):
            ok = math.isnan(result) and (not fmt.fnuz or pattern == 0x80)
        else:
            ok = fp8.overflow_allowed(fmt, value, result)
        found.append(SpecialCast(value, result, pattern, ok))
    return found


def check_saturating_quantize(fmt: Fp8Format, torch_device: torch.device) -> Comparison:
    """The recipe's cast (scale, clamp to +-max, cast) saturates overflow and infinities exactly."""
    values = torch.tensor([2 * fmt.max, -2 * fmt.max, 1e30, -1e30, math.inf, -math.inf, fmt.max, -fmt.max])
    golden = torch.tensor([fmt.max, -fmt.max] * 4, dtype=torch.float64)
    scaled = fp8.quantize(values.to(torch_device), torch.ones((), device=torch_device), fmt).float()
    return compare(f"fp8.cast [{fmt.name}: saturating quantize]", scaled, golden, tolerance_for("fp8.cast", "*"))


# ---------------------------------------------------------------------------------------------
# torch._scaled_mm


@dataclass
class Fp8Operands:
    """A [m, k] and W [n, k] in FP8 with their dequantization scales, and the data they came from."""

    a: torch.Tensor
    w: torch.Tensor
    a_inv: torch.Tensor  # () tensorwise, [m, 1] row-wise
    w_inv: torch.Tensor  # () tensorwise, [1, n] row-wise (scale of each output column)
    a_source: torch.Tensor
    w_source: torch.Tensor


def _scales(x: torch.Tensor, fmt: Fp8Format, rowwise: bool) -> torch.Tensor:
    amax = x.abs().amax(dim=1, keepdim=True) if rowwise else x.abs().amax()
    return fp8.scale_from_amax(amax, fmt.max, margin=0)


def _with_layout(fp8_tensor: torch.Tensor, layout: str) -> torch.Tensor:
    """The same FP8 values as a view into a larger buffer: 'sliced' pads every row (a leading
    dimension larger than the width), 'row-offset' starts 16 rows in; 'contiguous' is itself."""
    if layout == "contiguous":
        return fp8_tensor
    rows, cols = fp8_tensor.shape
    start = 16 if layout == "row-offset" else 0
    pad = 32 if layout == "sliced" else 0
    buffer = torch.zeros((rows + start, cols + pad), dtype=torch.uint8, device=fp8_tensor.device)
    buffer[start:, :cols] = fp8_tensor.view(torch.uint8)
    return buffer.view(fp8_tensor.dtype)[start:, :cols]


def fp8_operands(
    problem: GemmProblem, fmt: Fp8Format, rowwise: bool, device: torch.device | str, seed: int = 0
) -> Fp8Operands:
    """Random normal A and W quantized to `fmt` with amax scaling (per tensor or per row)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(problem.m, problem.k, generator=g).to(device)
    w = torch.randn(problem.n, problem.k, generator=g).to(device)
    a_scale, w_scale = _scales(a, fmt, rowwise), _scales(w, fmt, rowwise)
    w_inv = w_scale.reciprocal().reshape(1, -1) if rowwise else w_scale.reciprocal()
    return Fp8Operands(fp8.quantize(a, a_scale, fmt), fp8.quantize(w, w_scale, fmt), a_scale.reciprocal(), w_inv, a, w)


def emulate(ops: Fp8Operands, dtype: torch.dtype, magnitude: bool = False) -> torch.Tensor:
    """(A * a_inv) @ (W * w_inv)^T computed in `dtype` from the FP8 values; with `magnitude`,
    |A * a_inv| @ |W * w_inv|^T, the terms each element sums (the error model's scale)."""
    w_inv = ops.w_inv.reshape(-1, 1) if ops.w_inv.dim() else ops.w_inv
    a, w = ops.a.float().to(dtype), ops.w.float().to(dtype)  # FP8 upcasts exactly to float32
    a, w = a * ops.a_inv.to(dtype), w * w_inv.to(dtype)
    return a.abs() @ w.abs().t() if magnitude else a @ w.t()


def run_scaled_mm(ops: Fp8Operands, out_dtype: torch.dtype, layout: str = "contiguous") -> torch.Tensor:
    """torch._scaled_mm(A, W^T) with W^T column-major, both operands laid out as `layout` says."""
    a = _with_layout(ops.a, layout)
    w = _with_layout(ops.w, layout)
    return torch._scaled_mm(a, w.t(), scale_a=ops.a_inv, scale_b=ops.w_inv, out_dtype=out_dtype)


def check_scaled_mm(
    problem: GemmProblem,
    fmt: Fp8Format,
    scaling: str,
    out_dtype: str,
    device: DeviceInfo,
    torch_device: torch.device,
    layout: str = "contiguous",
) -> list[Comparison]:
    """_scaled_mm vs the float64 emulation of its operands (reference: float32 emulation), and
    vs the unquantized float64 product (SQNR)."""
    ops = fp8_operands(problem, fmt, scaling == "rowwise", torch_device)
    torch_out = getattr(torch, out_dtype)
    try:
        candidate = run_scaled_mm(ops, torch_out, layout)
    except RuntimeError as exc:
        raise AssertionError(
            f"scaled_mm [{fmt.name} {scaling} -> {out_dtype}, {layout} operands, {problem.describe()}] raised "
            f"instead of computing (strided operands are legal; cf. pytorch#197201): {exc}"
        ) from None
    label = f"[{fmt.name} {scaling} -> {out_dtype}, {layout} operands, {problem.describe()}]"
    golden = emulate(ops, torch.float64)
    reference = emulate(ops, torch.float32).to(torch_out)
    unquantized = ops.a_source.double() @ ops.w_source.double().t()
    return [
        compare(
            f"scaled_mm.emulation {label}",
            candidate,
            golden,
            tolerance_for(f"scaled_mm.emulation.{out_dtype}", device.backend, device.arch),
            reference,
            magnitude=emulate(ops, torch.float64, magnitude=True),
            terms=problem.k,
        ),
        compare(
            f"scaled_mm.quantization {label}",
            candidate,
            unquantized,
            tolerance_for("scaled_mm.quantization", device.backend, device.arch),
        ),
    ]


EXACT_KINDS = ("integers", "identity")


def exact_operands(kind: str, fmt: Fp8Format, rowwise: bool, device: torch.device | str) -> Fp8Operands:
    """Operands whose product is exact in bf16 and fp32: small integers (|sum| <= 256) with
    power-of-two scales, or the identity times random FP8 values."""
    g = torch.Generator().manual_seed(3)
    m, n, k = 32, 48, 64
    if kind == "integers":
        a = torch.randint(-2, 3, (m, k), generator=g).float()
        w = torch.randint(-2, 3, (n, k), generator=g).float()
    elif kind == "identity":
        m = k
        a = torch.eye(k)
        representable = torch.tensor([v for v in fp8.all_values(fmt) if math.isfinite(v)])
        w = representable[torch.randint(len(representable), (n, k), generator=g)]
    else:
        raise ValueError(f"exact case must be one of {', '.join(EXACT_KINDS)}, found {kind!r}")
    if rowwise:
        a_inv = (2.0 ** (torch.arange(m) % 3 - 1)).reshape(m, 1)
        w_inv = (2.0 ** (torch.arange(n) % 2)).reshape(1, n)
    else:
        a_inv, w_inv = torch.tensor(0.5), torch.tensor(2.0)
    return Fp8Operands(
        a.to(fmt.dtype).to(device),
        w.to(fmt.dtype).to(device),
        a_inv.float().to(device),
        w_inv.float().to(device),
        a.to(device),
        w.to(device),
    )


def check_scaled_mm_exact(
    kind: str, fmt: Fp8Format, scaling: str, out_dtype: str, torch_device: torch.device
) -> Comparison:
    ops = exact_operands(kind, fmt, scaling == "rowwise", torch_device)
    candidate = run_scaled_mm(ops, getattr(torch, out_dtype))
    return compare(
        f"scaled_mm.exact [{kind}, {fmt.name} {scaling} -> {out_dtype}]",
        candidate,
        emulate(ops, torch.float64),
        tolerance_for("scaled_mm.exact", "*"),
    )


# ---------------------------------------------------------------------------------------------
# FP8 linear layers against nn.Linear


@dataclass(frozen=True)
class LinearSize:
    tokens: int
    in_features: int
    out_features: int


def linear_size(is_gpu: bool) -> LinearSize:
    """BERT-L's FFN up-projection over 2048 tokens on a GPU; a 64 x 128 -> 256 layer on a CPU."""
    return LinearSize(2048, 1024, 4096) if is_gpu else LinearSize(64, 128, 256)


def _plain_linear(size: LinearSize, device: torch.device | str, seed: int) -> torch.nn.Linear:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Linear(size.in_features, size.out_features).to(device)


def _linear_step(
    layer: torch.nn.Module, x: torch.Tensor, upstream: torch.Tensor, context: Callable[[], AbstractContextManager[Any]]
) -> tuple[torch.Tensor, ...]:
    x = x.detach().requires_grad_(True)
    with context():
        out = layer(x)
    grad_x, grad_w = torch.autograd.grad(out, (x, cast(torch.Tensor, layer.weight)), upstream)
    return out.detach(), grad_x, grad_w


def run_steps(
    layer: torch.nn.Module,
    size: LinearSize,
    dtype: torch.dtype,
    device: torch.device | str,
    steps: int,
    context: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
    """`steps` forward + backward passes on fresh seeded batches (filling any delayed-scaling
    history); returns the last pass's (out, grad_input, grad_weight) and its batch and upstream."""
    g = torch.Generator().manual_seed(17)
    for _ in range(steps):
        x = torch.randn(size.tokens, size.in_features, generator=g).to(device=device, dtype=dtype)
        upstream = torch.randn(size.tokens, size.out_features, generator=g).to(device=device, dtype=dtype)
        found = _linear_step(layer, x, upstream, context)
    return found, x, upstream


PARTS = ("out", "grad_input", "grad_weight")


def check_fp8_layer(
    make_layer: Callable[[torch.nn.Linear], torch.nn.Module],
    label: str,
    size: LinearSize,
    dtype: str,
    device: DeviceInfo,
    torch_device: torch.device,
    context: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
    steps: int = 3,
) -> list[Comparison]:
    """An FP8 linear layer built from an nn.Linear vs that nn.Linear in float64, by SQNR of the
    output and of the input and weight gradients on the last of `steps` batches."""
    torch_dtype = getattr(torch, dtype)
    linear = _plain_linear(size, torch_device, seed=5)
    golden_layer = copy.deepcopy(linear).double()
    candidate = make_layer(copy.deepcopy(linear).to(torch_dtype))
    found, x, upstream = run_steps(candidate, size, torch_dtype, torch_device, steps, context)
    golden = _linear_step(golden_layer, x.double(), upstream.double(), contextlib.nullcontext)
    shape = f"{size.tokens}x{size.in_features}->{size.out_features}, {dtype}"
    return [
        compare(
            f"fp8_linear.{part} [{label}, {shape}]",
            found[i],
            golden[i],
            tolerance_for(f"fp8_linear.{part}", device.backend, device.arch),
        )
        for i, part in enumerate(PARTS)
    ]


def check_fp8_linear_paths(
    formats: tuple[str, str],
    size: LinearSize,
    dtype: str,
    device: DeviceInfo,
    torch_device: torch.device,
    steps: int = 3,
) -> list[Comparison]:
    """The own recipe through torch._scaled_mm vs through its float32 emulation: both see
    the same batches, so their scales and FP8 operands agree and only the GEMMs differ."""
    torch_dtype = getattr(torch, dtype)
    linear = _plain_linear(size, torch_device, seed=5).to(torch_dtype)
    fast = fp8.Fp8Linear.from_linear(copy.deepcopy(linear), formats, matmul="scaled_mm")
    emulated = fp8.Fp8Linear.from_linear(copy.deepcopy(linear), formats, matmul="emulated")
    found, _, _ = run_steps(fast, size, torch_dtype, torch_device, steps)
    expected, _, _ = run_steps(emulated, size, torch_dtype, torch_device, steps)
    tolerance = tolerance_for("fp8_linear.paths", device.backend, device.arch)
    shape = f"{size.tokens}x{size.in_features}->{size.out_features}, {dtype}, {'/'.join(formats)}"
    return [
        compare(f"fp8_linear.paths.{part} [_scaled_mm vs emulation, {shape}]", found[i], expected[i], tolerance)
        for i, part in enumerate(PARTS)
    ]


# ---------------------------------------------------------------------------------------------
# FP8 training recipes (torchao, Transformer Engine, the project's) on Llama-3.1-8B-shaped blocks


@dataclass(frozen=True)
class RecipeCase:
    """One recipe on one Llama block: kind 'ffn' or 'decoder', scale 'full' (GPU) or 'tiny'
    (CPU), the device's (forward, gradient) formats, the training dtype; `compiled` runs the
    converted block under torch.compile, as torchao's users do."""

    recipe: Fp8Recipe
    kind: str
    scale: str
    formats: tuple[str, ...]
    dtype: str
    compiled: bool = False

    @property
    def label(self) -> str:
        size = fp8_recipes.block_size(self.scale)
        model = "llama-3.1-8b" if self.scale == "full" else f"llama-3.1-8b-{self.scale}"
        mode = ", torch.compile" if self.compiled else ""
        return (
            f"{self.recipe.name} {'/'.join(self.formats[:2])}, {model} {self.kind} {size.batch}x{size.seq} "
            f"tokens, {self.dtype}{mode}"
        )


Parts = dict[str, torch.Tensor]  # 'out', 'grad_input', then 'grad.<parameter>' for every parameter


def block_pass(
    block: torch.nn.Module,
    x: torch.Tensor,
    upstream: torch.Tensor,
    run: Callable[[torch.Tensor], torch.Tensor] | None = None,
    context: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
) -> Parts:
    """Forward and backward of `block` (called through `run`, e.g. its compiled form) on `x` with
    upstream gradient `upstream`: the output, the input gradient and every parameter's gradient."""
    x = x.detach().requires_grad_(True)
    names, params = zip(*block.named_parameters())
    with context():
        out = (block if run is None else run)(x)
    grads = torch.autograd.grad(out, (x, *params), upstream)
    return {"out": out.detach(), "grad_input": grads[0], **{f"grad.{n}": g for n, g in zip(names, grads[1:])}}


def _block_batches(
    case: RecipeCase, hidden: int, device: torch.device | str, steps: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    size = fp8_recipes.block_size(case.scale)
    g = torch.Generator().manual_seed(17)
    dtype = getattr(torch, case.dtype)
    shape = (size.batch, size.seq, hidden)
    return [
        (torch.randn(shape, generator=g).to(device, dtype), torch.randn(shape, generator=g).to(device, dtype))
        for _ in range(steps)
    ]


def _converted(block: torch.nn.Module, case: RecipeCase) -> torch.nn.Module:
    candidate = copy.deepcopy(block)
    if fp8_recipes.convert(candidate, case.recipe, case.formats) == 0:
        raise AssertionError(f"{case.recipe.name}: converting the {case.kind} block replaced no nn.Linear")
    return candidate


def recipe_block_pass(
    case: RecipeCase, device: torch.device | str, steps: int = 3, fault: str = ""
) -> tuple[Parts, Parts, Parts]:
    """(golden, reference, candidate) of one Llama block: the block in float64, in the training
    dtype, and converted to the recipe (optionally with a planted `fault`), on the last of `steps`
    seeded batches with random upstream gradients (earlier ones fill delayed-scaling histories)."""
    reference_block = fp8_recipes.llama_block(case.kind, case.scale, device).to(getattr(torch, case.dtype))
    golden_block = copy.deepcopy(reference_block).double()
    candidate = _converted(reference_block, case)
    run = torch.compile(candidate) if case.compiled else candidate
    batches = _block_batches(case, reference_block.hidden_size, device, steps)
    planted = fp8_recipes.plant_fault(fault, candidate, case.recipe) if fault else contextlib.nullcontext()
    with planted:
        for x, upstream in batches:
            found = block_pass(candidate, x, upstream, run, lambda: fp8_recipes.forward_context(case.recipe))
    x, upstream = batches[-1]
    reference = block_pass(reference_block, x, upstream)
    golden = block_pass(golden_block, x.double(), upstream.double())
    return golden, reference, found


def _as_matrix(t: torch.Tensor) -> torch.Tensor:
    """A tensor as rows x its last dimension (a vector as one row)."""
    return t.reshape(-1, t.shape[-1]) if t.dim() > 1 else t.reshape(1, -1)


def worst_tile(golden: torch.Tensor, candidate: torch.Tensor, tile: int = fp8_recipes.TILE) -> tuple[slice, slice]:
    """Rows and columns (of the tensors as matrices) of the tile x tile block where the candidate's
    SQNR against the golden is lowest: a zeroed or wrongly scaled tile hides in a large tensor's
    overall SQNR, not in its own."""
    g = _as_matrix(golden.detach().double())
    c = _as_matrix(candidate.detach().to(g.device, torch.float64))
    rows, cols = g.shape
    tr, tc = min(tile, rows), min(tile, cols)
    pad = (0, -cols % tc, 0, -rows % tr)

    def per_tile(t: torch.Tensor) -> torch.Tensor:
        padded = torch.nn.functional.pad(t, pad)
        return padded.reshape(padded.shape[0] // tr, tr, padded.shape[1] // tc, tc).sum((1, 3))

    signal, noise = per_tile(g.square()), per_tile((g - c).square())
    ratio = torch.where(signal > 0, noise / signal, torch.where(noise > 0, math.inf, 0.0))
    worst = int(torch.nan_to_num(ratio, nan=math.inf).reshape(-1).argmax())
    i, j = divmod(worst, ratio.shape[1])
    return slice(i * tr, min((i + 1) * tr, rows)), slice(j * tc, min((j + 1) * tc, cols))


def _part_check(part: str) -> str:
    return part if part in ("out", "grad_input") else "grad_weight"


def compare_recipe_parts(
    case: RecipeCase, golden: Parts, reference: Parts, found: Parts, device: DeviceInfo
) -> list[Comparison]:
    """Output and every gradient against the float64 golden (the training-dtype reference's SQNR
    shown beside it), each overall and in its worst 128 x 128 tile."""
    missing = sorted(set(golden) ^ set(found))
    if missing:
        raise AssertionError(
            f"{case.recipe.name}: the converted {case.kind} block's outputs and gradients differ "
            f"from the original's in {', '.join(missing)}"
        )
    rule = f"fp8_recipe.{case.kind}"
    tile_tolerance = tolerance_for(f"{rule}.tile", device.backend, device.arch, case.recipe.name)
    results = []
    for part, expected in golden.items():
        name = part.removeprefix("grad.")
        shown = f"[{case.label}: {name} {tuple(expected.shape)}]" if part.startswith("grad.") else f"[{case.label}]"
        tolerance = tolerance_for(f"{rule}.{_part_check(part)}", device.backend, device.arch, case.recipe.name)
        results.append(
            compare(f"{rule}.{_part_check(part)} {shown}", found[part], expected, tolerance, reference[part])
        )
        rows, cols = worst_tile(expected, found[part])
        g, c, r = (_as_matrix(t)[rows, cols] for t in (expected, found[part], reference[part]))
        where = f"rows {rows.start}:{rows.stop} cols {cols.start}:{cols.stop}"
        results.append(compare(f"{rule}.tile [{case.label}: {part} worst tile, {where}]", c, g, tile_tolerance, r))
    return results


def check_recipe_block(
    case: RecipeCase, device: DeviceInfo, torch_device: torch.device, fault: str = ""
) -> list[Comparison]:
    """An FP8 recipe on a Llama-3.1-8B-shaped FFN or decoder layer, forward and backward, by SQNR
    against the block in float64: output, input gradient, every parameter gradient."""
    golden, reference, found = recipe_block_pass(case, torch_device, fault=fault)
    return compare_recipe_parts(case, golden, reference, found, device)


LossCurves = dict[str, list[float]]  # 'golden', 'reference', 'candidate': the loss before each step


def _train(
    block: torch.nn.Module,
    x: torch.Tensor,
    target: torch.Tensor,
    steps: int,
    warmup: int,
    context: Callable[[], AbstractContextManager[Any]],
) -> list[float]:
    """AdamW steps on one batch towards `target` (mean squared error in float64); `warmup`
    forward + backward passes first, without a step, fill delayed-scaling histories."""
    optimizer = torch.optim.AdamW(block.parameters(), lr=1e-3, weight_decay=0.0)
    losses = []
    for step in range(warmup + steps):
        with context():
            loss = (block(x).double() - target).square().mean()
        loss.backward()
        if step >= warmup:
            optimizer.step()
            losses.append(loss.item())
        optimizer.zero_grad(set_to_none=True)
    return losses


def recipe_training_losses(case: RecipeCase, device: torch.device | str, steps: int = 6, fault: str = "") -> LossCurves:
    """Loss curves of a few AdamW steps teaching the block to match another block (a teacher of
    the same shape) on one batch: in float64, with float32 master weights in the training dtype
    (bf16 autocast on a GPU) and converted to the recipe in the same dtype."""
    student = fp8_recipes.llama_block(case.kind, case.scale, device, seed=0)
    teacher = fp8_recipes.llama_block(case.kind, case.scale, device, seed=1).double()
    size = fp8_recipes.block_size(case.scale)
    g = torch.Generator().manual_seed(23)
    x = torch.randn(size.batch, size.seq, student.hidden_size, generator=g).to(device)
    with torch.no_grad():
        target = teacher(x.double())
    autocast = case.dtype != "float32"

    def mixed() -> AbstractContextManager[Any]:
        return torch.autocast(x.device.type, dtype=getattr(torch, case.dtype), enabled=autocast)

    candidate = _converted(student, case)

    @contextlib.contextmanager
    def recipe_context() -> Any:
        with mixed(), fp8_recipes.forward_context(case.recipe):
            yield

    golden = _train(copy.deepcopy(student).double(), x.double(), target, steps, 0, contextlib.nullcontext)
    planted = fp8_recipes.plant_fault(fault, candidate, case.recipe) if fault else contextlib.nullcontext()
    with planted:
        found = _train(candidate, x, target, steps, warmup=3, context=recipe_context)
    return {"golden": golden, "reference": _train(student, x, target, steps, 0, mixed), "candidate": found}


def check_recipe_training(
    case: RecipeCase, device: DeviceInfo, torch_device: torch.device, fault: str = ""
) -> Comparison:
    """The recipe's loss curve against the float64 one, step by step (training-dtype reference beside it)."""
    curves = recipe_training_losses(case, torch_device, fault=fault)
    golden, reference, found = (
        torch.tensor(curves[k], dtype=torch.float64) for k in ("golden", "reference", "candidate")
    )
    tolerance = tolerance_for(f"fp8_recipe.{case.kind}.loss", device.backend, device.arch, case.recipe.name)
    return compare(
        f"fp8_recipe.{case.kind}.loss [{case.label}: {len(curves['golden'])} AdamW steps]",
        found,
        golden,
        tolerance,
        reference,
    )
