"""FP8 checks on a device: casts, torch._scaled_mm, and FP8 linear layers.

Casts are compared bit for bit with the pure reference of `rocm_validate.workloads.fp8`. `_scaled_mm` is
compared with the float64 emulation of the same FP8 operands (golden) measured against the float32
emulation (reference), and with the unquantized product for SQNR. FP8 linear layers (the
project's delayed-scaling recipe, torchao's, Transformer Engine's) are compared with nn.Linear in
float64 by SQNR, after warm-up steps that fill the delayed-scaling history.
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

import torch

from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.workloads import fp8
from rocm_validate.workloads.fp8 import Fp8Format
from rocm_validate.workloads.shapes import GemmProblem

LAYOUTS = ("contiguous", "sliced", "row-offset")


def _canonical_bits(bits: torch.Tensor, fmt: Fp8Format) -> torch.Tensor:
    """Bit patterns as float64, every NaN pattern folded into the format's canonical NaN."""
    values = bits.cpu().view(fmt.dtype).float()
    return torch.where(torch.isnan(values), float(fp8.nan_bits(fmt)), bits.cpu().double())


def check_bit_patterns(fmt: Fp8Format, device: Any) -> list[Comparison]:
    """Upcast of all 256 patterns on the device vs the reference decoding (values and signs of
    zero), then the round trip value -> FP8 on the device must give the pattern back."""
    exact = tolerance_for("fp8.cast", "*")
    patterns = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    golden = torch.tensor(fp8.all_values(fmt), dtype=torch.float64)
    upcast = patterns.to(device).view(fmt.dtype).float()
    signs = torch.where(torch.isnan(golden), math.nan, torch.signbit(upcast.cpu()).double())
    golden_signs = torch.where(torch.isnan(golden), math.nan, torch.signbit(golden).double())
    back = upcast.to(fmt.dtype).view(torch.uint8)
    return [
        compare(f"fp8.cast [{fmt.name}: upcast of all 256 bit patterns]", upcast, golden, exact),
        compare(f"fp8.cast [{fmt.name}: sign of every decoded pattern]", signs, golden_signs, exact),
        compare(f"fp8.cast [{fmt.name}: round trip of all 256 bit patterns, as bits]",
                _canonical_bits(back, fmt), _canonical_bits(patterns, fmt), exact),
    ]


def check_rounding(fmt: Fp8Format, source_dtype: str, device: Any) -> Comparison:
    """Casting from `source_dtype` rounds to nearest, ties to even: every representable value,
    midpoint and quarter point in +-max, plus -0 and tiny negatives (-0 in OCP, +0 in fnuz)."""
    probes = fp8.rounding_probes(fmt) + [-0.0, -fmt.min_subnormal / 4, -fmt.min_subnormal / 2]
    source = torch.tensor(probes, dtype=torch.float64).to(getattr(torch, source_dtype))
    if not torch.equal(source.double(), torch.tensor(probes, dtype=torch.float64)):
        raise ValueError(f"{source_dtype} cannot hold every {fmt.name} rounding probe exactly")
    got = source.to(device).to(fmt.dtype).view(torch.uint8)
    expected = torch.tensor([fp8.encode(p, fmt) for p in probes], dtype=torch.int32).to(torch.uint8)
    return compare(f"fp8.cast [{fmt.name} from {source_dtype}: round to nearest even, {len(probes)} probes]",
                   _canonical_bits(got, fmt), _canonical_bits(expected, fmt), tolerance_for("fp8.cast", "*"))


@dataclass(frozen=True)
class SpecialCast:
    value: float
    result: float
    bits: int
    allowed: bool


def special_casts(fmt: Fp8Format, device: Any) -> list[SpecialCast]:
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


def check_saturating_quantize(fmt: Fp8Format, device: Any) -> Comparison:
    """The recipe's cast (scale, clamp to +-max, cast) saturates overflow and infinities exactly."""
    values = torch.tensor([2 * fmt.max, -2 * fmt.max, 1e30, -1e30, math.inf, -math.inf, fmt.max, -fmt.max])
    golden = torch.tensor([fmt.max, -fmt.max] * 4, dtype=torch.float64)
    scaled = fp8.quantize(values.to(device), torch.ones((), device=device), fmt).float()
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


def fp8_operands(problem: GemmProblem, fmt: Fp8Format, rowwise: bool, device: Any, seed: int = 0) -> Fp8Operands:
    """Random normal A and W quantized to `fmt` with amax scaling (per tensor or per row)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(problem.m, problem.k, generator=g).to(device)
    w = torch.randn(problem.n, problem.k, generator=g).to(device)
    a_scale, w_scale = _scales(a, fmt, rowwise), _scales(w, fmt, rowwise)
    w_inv = w_scale.reciprocal().reshape(1, -1) if rowwise else w_scale.reciprocal()
    return Fp8Operands(fp8.quantize(a, a_scale, fmt), fp8.quantize(w, w_scale, fmt), a_scale.reciprocal(), w_inv, a, w)


def emulate(ops: Fp8Operands, dtype: torch.dtype) -> torch.Tensor:
    """(A * a_inv) @ (W * w_inv)^T computed in `dtype` from the FP8 values."""
    w_inv = ops.w_inv.reshape(-1, 1) if ops.w_inv.dim() else ops.w_inv
    a, w = ops.a.float().to(dtype), ops.w.float().to(dtype)  # FP8 upcasts exactly to float32
    return (a * ops.a_inv.to(dtype)) @ (w * w_inv.to(dtype)).t()


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
    device: Any,
    platform: str,
    arch: str,
    layout: str = "contiguous",
) -> list[Comparison]:
    """_scaled_mm vs the float64 emulation of its operands (reference: float32 emulation), and
    vs the unquantized float64 product (SQNR)."""
    ops = fp8_operands(problem, fmt, scaling == "rowwise", device)
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
        compare(f"scaled_mm.emulation {label}", candidate, golden,
                tolerance_for(f"scaled_mm.emulation.{out_dtype}", platform, arch), reference),
        compare(f"scaled_mm.quantization {label}", candidate, unquantized,
                tolerance_for("scaled_mm.quantization", platform, arch)),
    ]


EXACT_KINDS = ("integers", "identity")


def exact_operands(kind: str, fmt: Fp8Format, rowwise: bool, device: Any) -> Fp8Operands:
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
        a.to(fmt.dtype).to(device), w.to(fmt.dtype).to(device), a_inv.float().to(device), w_inv.float().to(device),
        a.to(device), w.to(device),
    )


def check_scaled_mm_exact(kind: str, fmt: Fp8Format, scaling: str, out_dtype: str, device: Any) -> Comparison:
    ops = exact_operands(kind, fmt, scaling == "rowwise", device)
    candidate = run_scaled_mm(ops, getattr(torch, out_dtype))
    return compare(f"scaled_mm.exact [{kind}, {fmt.name} {scaling} -> {out_dtype}]", candidate,
                   emulate(ops, torch.float64), tolerance_for("scaled_mm.exact", "*"))


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


def _reference_linear(size: LinearSize, device: Any, seed: int) -> torch.nn.Linear:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Linear(size.in_features, size.out_features).to(device)


def _linear_step(layer: torch.nn.Module, x: torch.Tensor, upstream: torch.Tensor,
                 context: Callable[[], ContextManager[Any]]) -> tuple[torch.Tensor, ...]:
    x = x.detach().requires_grad_(True)
    with context():
        out = layer(x)
    grad_x, grad_w = torch.autograd.grad(out, (x, layer.weight), upstream)
    return out.detach(), grad_x, grad_w


def run_steps(
    layer: torch.nn.Module,
    size: LinearSize,
    dtype: torch.dtype,
    device: Any,
    steps: int,
    context: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
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
    device: Any,
    platform: str,
    arch: str,
    context: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
    steps: int = 3,
) -> list[Comparison]:
    """An FP8 linear layer built from an nn.Linear vs that nn.Linear in float64, by SQNR of the
    output and of the input and weight gradients on the last of `steps` batches."""
    torch_dtype = getattr(torch, dtype)
    linear = _reference_linear(size, device, seed=5)
    golden_layer = copy.deepcopy(linear).double()
    candidate = make_layer(copy.deepcopy(linear).to(torch_dtype))
    found, x, upstream = run_steps(candidate, size, torch_dtype, device, steps, context)
    golden = _linear_step(golden_layer, x.double(), upstream.double(), contextlib.nullcontext)
    shape = f"{size.tokens}x{size.in_features}->{size.out_features}, {dtype}"
    return [
        compare(f"fp8_linear.{part} [{label}, {shape}]", found[i], golden[i], tolerance_for(f"fp8_linear.{part}", platform, arch))
        for i, part in enumerate(PARTS)
    ]


def check_fp8_linear_paths(
    formats: tuple[str, str], size: LinearSize, dtype: str, device: Any, platform: str, arch: str, steps: int = 3
) -> list[Comparison]:
    """The reference recipe through torch._scaled_mm vs through its float32 emulation: both see
    the same batches, so their scales and FP8 operands agree and only the GEMMs differ."""
    torch_dtype = getattr(torch, dtype)
    linear = _reference_linear(size, device, seed=5).to(torch_dtype)
    fast = fp8.Fp8Linear.from_linear(copy.deepcopy(linear), formats, matmul="scaled_mm")
    emulated = fp8.Fp8Linear.from_linear(copy.deepcopy(linear), formats, matmul="emulated")
    found, _, _ = run_steps(fast, size, torch_dtype, device, steps)
    expected, _, _ = run_steps(emulated, size, torch_dtype, device, steps)
    tolerance = tolerance_for("fp8_linear.paths", platform, arch)
    shape = f"{size.tokens}x{size.in_features}->{size.out_features}, {dtype}, {'/'.join(formats)}"
    return [
        compare(f"fp8_linear.paths.{part} [_scaled_mm vs emulation, {shape}]", found[i], expected[i], tolerance)
        for i, part in enumerate(PARTS)
    ]
