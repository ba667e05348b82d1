"""FP8: the formats, a pure-Python model of their encodings, and the project's own delayed-scaling recipe.

Formats come from the device (`DeviceInfo.fp8_formats`): gfx94x (MI300X / MI325X) computes in the
fnuz variants (no negative zero, one NaN at 0x80, no infinities, E4M3 max 240); gfx950, gfx12,
NVIDIA sm_89+ and the CPU in the OCP variants (E4M3 max 448, E5M2 with infinities).

The own recipe is Transformer Engine's delayed scaling, written out: each tensor role (input, weight,
gradient) keeps an amax history whose row 0 holds the current step; after each cast the scale
for the next step is fp8_max / amax / 2^margin with amax reduced over the history, then the
history rolls by -1 and row 0 is zeroed. An amax of 0, Inf or NaN gives scale 1.
`Fp8Linear` computes through `torch._scaled_mm` where the device supports it and through a
float32 emulation of the same FP8 operands otherwise; `convert_to_fp8_linear` swaps it into a model.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass
from typing import Any

import torch

from rocm_validate.platform import arch, capabilities


@dataclass(frozen=True)
class Fp8Format:
    """An 8-bit float format: 1 sign bit, exponent and mantissa widths, bias and special values."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max: float
    has_inf: bool  # e5m2 only
    fnuz: bool  # finite + NaN only, unsigned zero: 0x80 is the one NaN, there is no -0

    @property
    def dtype(self) -> torch.dtype:
        return getattr(torch, f"float8_{self.name}")

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (1 - self.bias - self.mantissa_bits)


FORMATS: dict[str, Fp8Format] = {
    f.name: f
    for f in (
        Fp8Format("e4m3fn", 4, 3, 7, 448.0, has_inf=False, fnuz=False),
        Fp8Format("e5m2", 5, 2, 15, 57344.0, has_inf=True, fnuz=False),
        Fp8Format("e4m3fnuz", 4, 3, 8, 240.0, has_inf=False, fnuz=True),
        Fp8Format("e5m2fnuz", 5, 2, 16, 57344.0, has_inf=False, fnuz=True),
    )
}


def fp8_format(name: str) -> Fp8Format:
    """The format called `name`; ValueError naming the known ones otherwise."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown FP8 format {name!r}; known: {', '.join(FORMATS)}") from None


def decode(bits: int, fmt: Fp8Format) -> float:
    """The value of the 8-bit pattern `bits` in `fmt`, from the format's definition alone."""
    if not 0 <= bits <= 255:
        raise ValueError(f"an FP8 bit pattern is 0..255, found {bits}")
    m = fmt.mantissa_bits
    exponent_all_ones = (1 << fmt.exponent_bits) - 1
    sign = -1.0 if bits & 0x80 else 1.0
    exponent = (bits >> m) & exponent_all_ones
    mantissa = bits & ((1 << m) - 1)
    if fmt.fnuz:
        if bits == 0x80:
            return math.nan
    elif fmt.has_inf and exponent == exponent_all_ones:
        return sign * math.inf if mantissa == 0 else math.nan
    elif not fmt.has_inf and exponent == exponent_all_ones and mantissa == (1 << m) - 1:
        return math.nan
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - fmt.bias - m)
    return sign * (1.0 + mantissa / (1 << m)) * 2.0 ** (exponent - fmt.bias)


def all_values(fmt: Fp8Format) -> list[float]:
    """The value of every bit pattern 0..255, in order."""
    return [decode(bits, fmt) for bits in range(256)]


@functools.cache
def _positive_table(name: str) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Non-negative finite values of a format in increasing order, with their bit patterns."""
    fmt = FORMATS[name]
    pairs = sorted((decode(bits, fmt), bits) for bits in range(128) if math.isfinite(decode(bits, fmt)))
    return tuple(v for v, _ in pairs), tuple(b for _, b in pairs)


def nan_bits(fmt: Fp8Format) -> int:
    return 0x80 if fmt.fnuz else 0x7F


def encode(value: float, fmt: Fp8Format) -> int:
    """The pure cast: round to nearest, ties to even, saturating at +-max (the recipe's clamp).

    A zero result keeps the sign in OCP formats (-0 is 0x80) and is +0 in fnuz formats.
    """
    if math.isnan(value):
        return nan_bits(fmt)
    values, patterns = _positive_table(fmt.name)
    magnitude = min(abs(value), fmt.max)
    upper = bisect.bisect_left(values, magnitude)
    if values[upper] == magnitude:
        chosen = patterns[upper]
    else:
        below, above = values[upper - 1], values[upper]
        if magnitude - below != above - magnitude:
            chosen = patterns[upper - 1] if magnitude - below < above - magnitude else patterns[upper]
        else:
            chosen = patterns[upper - 1] if patterns[upper - 1] % 2 == 0 else patterns[upper]
    negative = math.copysign(1.0, value) < 0
    if negative and not (fmt.fnuz and chosen == 0):
        chosen |= 0x80
    return chosen


def rounding_probes(fmt: Fp8Format) -> list[float]:
    """Values that pin down rounding: every finite value, every midpoint (a tie), and points a
    quarter of the way between neighbours, both signs, all inside +-max."""
    values, _ = _positive_table(fmt.name)
    probes: list[float] = []
    for low, high in zip(values, values[1:]):
        probes += [low, (low + high) / 2, low + (high - low) / 4, high - (high - low) / 4]
    probes.append(values[-1])
    return probes + [-p for p in probes]


def overflow_description(fmt: Fp8Format, from_infinity: bool) -> str:
    """What a plain (unscaled) cast may produce for a value beyond +-max (see `overflow_allowed`):
    e5m2 keeps infinities; formats without them saturate or give NaN."""
    if fmt.has_inf:
        return "+-inf" if from_infinity else "+-max or +-inf"
    return "NaN or +-max"


def overflow_allowed(fmt: Fp8Format, value: float, result: float) -> bool:
    """Whether `result` is an acceptable plain cast of the out-of-range `value` (sign kept)."""
    if math.isnan(result):
        return not fmt.has_inf
    if math.copysign(1.0, result) != math.copysign(1.0, value):
        return False
    if math.isinf(value):
        return math.isinf(result) if fmt.has_inf else abs(result) == fmt.max
    return abs(result) == fmt.max or (fmt.has_inf and math.isinf(result))


# ---------------------------------------------------------------------------------------------
# torch._scaled_mm on a torch device: facts from torch, the decision from platform.capabilities.


@functools.cache
def scaled_mm_usable(device_type: str, index: int | None = None) -> bool:
    """Whether torch._scaled_mm runs on this torch device: the arch and runtime torch reports,
    judged by `capabilities.scaled_mm_supported`."""
    if not hasattr(torch, "_scaled_mm"):
        return False
    if device_type == "cpu":
        return capabilities.scaled_mm_supported("cpu", "cpu", None)
    if device_type != "cuda" or not torch.cuda.is_available():
        return False
    props = torch.cuda.get_device_properties(index or 0)
    if getattr(torch.version, "hip", None):
        gcn = arch.parse_gcn_arch(str(getattr(props, "gcnArchName", "")))
        return capabilities.scaled_mm_supported("rocm", gcn.name, torch.version.hip)
    return capabilities.scaled_mm_supported("cuda", arch.sm_arch(props.major, props.minor), torch.version.cuda)


def _pad_to(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """`t` zero-padded to rows x cols (0x00 is +0 in every FP8 format)."""
    if tuple(t.shape) == (rows, cols):
        return t
    out = torch.zeros((rows, cols), dtype=torch.uint8, device=t.device)
    out[: t.shape[0], : t.shape[1]] = t.view(torch.uint8)
    return out.view(t.dtype)


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def fp8_mm(
    a: torch.Tensor,
    b: torch.Tensor,
    a_scale_inv: torch.Tensor,
    b_scale_inv: torch.Tensor,
    out_dtype: torch.dtype,
    use_scaled_mm: bool,
    alignment: int | None = None,
) -> torch.Tensor:
    """(a * a_scale_inv) @ (b * b_scale_inv) for FP8 a [M, K] and b [K, N], in `out_dtype`.

    Through torch._scaled_mm (A row-major, B column-major, K and N zero-padded to `alignment`,
    by default the device's) or through the float32 emulation of the same operands.
    """
    if not use_scaled_mm:
        product = a.float() @ b.float()
        return (product * (a_scale_inv * b_scale_inv)).to(out_dtype)
    align = alignment or capabilities.scaled_mm_alignment(a.device.type)
    m, k = a.shape
    n = b.shape[1]
    k_pad, n_pad = _round_up(k, align), _round_up(n, align)
    a_ready = _pad_to(a.contiguous(), m, k_pad)
    b_ready = _pad_to(b.t().contiguous(), n_pad, k_pad).t()
    out = torch._scaled_mm(a_ready, b_ready, scale_a=a_scale_inv, scale_b=b_scale_inv, out_dtype=out_dtype)
    return out[:, :n]


# ---------------------------------------------------------------------------------------------
# Delayed scaling, the own recipe.


@dataclass(frozen=True)
class DelayedScaling:
    """Transformer Engine's recipe: history length, margin (powers of two of headroom) and how
    the history is reduced to one amax ('max' over the window, or 'most_recent')."""

    history_len: int = 16
    margin: int = 0
    amax_compute: str = "max"

    def __post_init__(self) -> None:
        if self.history_len < 1:
            raise ValueError(f"amax history length must be at least 1, found {self.history_len}")
        if self.margin < 0:
            raise ValueError(f"margin must be >= 0, found {self.margin}")
        if self.amax_compute not in ("max", "most_recent"):
            raise ValueError(f"amax_compute must be 'max' or 'most_recent', found {self.amax_compute!r}")


def scale_from_amax(amax: torch.Tensor, fp8_max: float, margin: int) -> torch.Tensor:
    """fp8_max / amax / 2^margin in float32; 1 where amax is 0, Inf or NaN (or the scale overflows)."""
    scale = (fp8_max / 2.0**margin) / amax.float()  # dividing by 2^margin first is exact
    # amax 0 or too small gives +inf, amax +inf gives 0, NaN stays NaN: all of them give 1
    return torch.where((scale > 0) & torch.isfinite(scale), scale, 1.0)


def roll_history(history: torch.Tensor) -> torch.Tensor:
    """The history after a step: rolled by -1 along time (dim 0), row 0 zeroed for the next amax.

    Zeroed in place (`zero_`), not by assigning a Python 0: that assignment copies a host scalar
    into device memory, a pageable copy that waits for everything queued on the GPU, three times
    per layer per step. It held the eager FP8 Llama step to the host's pace: on an H100 the host
    took 137 ms to enqueue a 154 ms step (41 ms after the fix, step 146 ms), and the step's rate
    differed by 6% between VMs whose hosts differ (docs/measurements.md)."""
    rolled = torch.roll(history, -1, dims=0)
    rolled[0].zero_()
    return rolled


def reduce_history(history: torch.Tensor, amax_compute: str) -> torch.Tensor:
    return history.amax(dim=0) if amax_compute == "max" else history[0]


def quantize(x: torch.Tensor, scale: torch.Tensor, fmt: Fp8Format) -> torch.Tensor:
    """x * scale, saturated to +-max, cast to `fmt` (NaN stays NaN)."""
    return (x.float() * scale).clamp(-fmt.max, fmt.max).to(fmt.dtype)


ROLES = ("input", "weight", "grad_output")


class ScalingState(torch.nn.Module):
    """Delayed-scaling state of one layer: amax history [history_len, roles] and scales [roles]."""

    amax_history: torch.Tensor  # buffers, registered in __init__
    scale: torch.Tensor

    def __init__(
        self, recipe: DelayedScaling, roles: int = len(ROLES), device: torch.device | str | None = None
    ) -> None:
        super().__init__()
        self.recipe = recipe
        self.register_buffer("amax_history", torch.zeros(recipe.history_len, roles, device=device))
        self.register_buffer("scale", torch.ones(roles, device=device))

    @torch.no_grad()
    def cast(self, x: torch.Tensor, role: int, fmt: Fp8Format) -> tuple[torch.Tensor, torch.Tensor]:
        """Cast `x` with this role's current scale; record its amax and set the next scale.

        Returns the FP8 tensor and the inverse scale that dequantizes it.
        """
        scale = self.scale[role]
        inverse = scale.reciprocal()  # taken before the scale is updated (kernels run in stream order)
        x_fp8 = quantize(x, scale, fmt)
        self.amax_history[0, role] = torch.linalg.vector_norm(x.detach(), float("inf")).float()  # max |x|, NaN kept
        amax = reduce_history(self.amax_history[:, role], self.recipe.amax_compute)
        self.scale[role] = scale_from_amax(amax, fmt.max, self.recipe.margin)
        self.amax_history[:, role] = roll_history(self.amax_history[:, role])
        return x_fp8, inverse


class _Fp8LinearFunction(torch.autograd.Function):
    """y = x W^T + b with x, W cast to the forward format; grad_output to the gradient format."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        layer: Fp8Linear,
        out_dtype: torch.dtype,
    ) -> Any:
        forward_fmt, _ = layer.fp8_formats
        use_scaled_mm = layer.uses_scaled_mm(x.device)
        x2 = x.reshape(-1, x.shape[-1])
        x_fp8, x_inv = layer.scaling.cast(x2, 0, forward_fmt)
        w_fp8, w_inv = layer.scaling.cast(weight, 1, forward_fmt)
        out = fp8_mm(x_fp8, w_fp8.t(), x_inv, w_inv, out_dtype, use_scaled_mm)
        if bias is not None:
            out = out + bias.to(out.dtype)
        ctx.save_for_backward(x_fp8, x_inv, w_fp8, w_inv)
        ctx.layer, ctx.use_scaled_mm, ctx.has_bias = layer, use_scaled_mm, bias is not None
        ctx.x_shape, ctx.x_dtype, ctx.w_dtype = x.shape, x.dtype, weight.dtype
        return out.reshape(*x.shape[:-1], out.shape[-1])

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> Any:
        x_fp8, x_inv, w_fp8, w_inv = ctx.saved_tensors
        _, gradient_fmt = ctx.layer.fp8_formats
        g2 = grad_out.reshape(-1, grad_out.shape[-1])
        g_fp8, g_inv = ctx.layer.scaling.cast(g2, 2, gradient_fmt)
        grad_x = fp8_mm(g_fp8, w_fp8, g_inv, w_inv, ctx.x_dtype, ctx.use_scaled_mm)
        grad_w = fp8_mm(g_fp8.t(), x_fp8, g_inv, x_inv, ctx.w_dtype, ctx.use_scaled_mm)
        grad_b = g2.sum(0).to(ctx.w_dtype) if ctx.has_bias else None
        return grad_x.reshape(ctx.x_shape), grad_w, grad_b, None, None


class Fp8Linear(torch.nn.Module):
    """nn.Linear computed in FP8 with delayed scaling (the project's own recipe).

    formats: (forward, gradient), e.g. ("e4m3fn", "e5m2") or ("e4m3fnuz", "e5m2fnuz").
    matmul: "auto" (torch._scaled_mm where the device has it), "scaled_mm" or "emulated".
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        formats: tuple[str, ...] = ("e4m3fn", "e5m2"),
        recipe: DelayedScaling = DelayedScaling(),
        matmul: str = "auto",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.fp8_formats = check_formats(formats)
        if matmul not in ("auto", "scaled_mm", "emulated"):
            raise ValueError(f"matmul must be 'auto', 'scaled_mm' or 'emulated', found {matmul!r}")
        self.matmul = matmul
        initial = torch.nn.Linear(in_features, out_features, bias, device=device, dtype=dtype)
        self.weight = initial.weight
        self.bias = initial.bias
        self.scaling = ScalingState(recipe, device=device)

    @classmethod
    def from_linear(
        cls,
        linear: torch.nn.Linear,
        formats: tuple[str, ...],  # (forward, gradient); check_formats says why anything else is refused
        recipe: DelayedScaling = DelayedScaling(),
        matmul: str = "auto",
    ) -> Fp8Linear:
        """An Fp8Linear sharing `linear`'s parameters (so tied weights and the optimizer's handles survive)."""
        layer = cls(
            linear.in_features, linear.out_features, linear.bias is not None, formats, recipe, matmul, device="meta"
        )
        layer.weight = linear.weight
        layer.bias = linear.bias
        layer.scaling = ScalingState(recipe, device=linear.weight.device)
        return layer

    def uses_scaled_mm(self, device: torch.device) -> bool:
        if self.matmul == "auto":
            return scaled_mm_usable(device.type, device.index)
        return self.matmul == "scaled_mm"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Under autocast the output takes the autocast dtype, as nn.Linear's does; the FP8
        casts and the product itself run outside autocast (it would turn the emulation's
        float32 product into a bf16 one)."""
        device_type = x.device.type
        out_dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else x.dtype
        with torch.autocast(device_type, enabled=False):
            return _Fp8LinearFunction.apply(x, self.weight, self.bias, self, out_dtype)

    def extra_repr(self) -> str:
        forward_fmt, gradient_fmt = self.fp8_formats
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            f"formats=({forward_fmt.name}, {gradient_fmt.name}), matmul={self.matmul}"
        )


def check_formats(formats: tuple[str, ...]) -> tuple[Fp8Format, Fp8Format]:
    """(forward, gradient) formats, both OCP or both fnuz; ValueError saying need vs found."""
    if len(formats) != 2:
        raise ValueError(
            f"FP8 needs two formats (forward, gradient), e.g. ('e4m3fn', 'e5m2'); found {tuple(formats)!r}"
            + ("; this device has no native FP8 (DeviceInfo.fp8_formats is empty)" if not formats else "")
        )
    forward_fmt, gradient_fmt = (fp8_format(name) for name in formats)
    if forward_fmt.fnuz != gradient_fmt.fnuz:
        raise ValueError(f"FP8 formats must be both OCP or both fnuz, found {formats[0]} with {formats[1]}")
    return forward_fmt, gradient_fmt


class Fp8LinearSwap:
    """Every torch.nn.Linear inside a model paired with an Fp8Linear sharing its parameters.

    `fp8()` puts the FP8 layers in place of the originals and `original()` puts the originals
    back; the parameters (and so an optimizer built over them) are the same either way, and each
    FP8 layer keeps its delayed-scaling history across swaps. `keep` names modules (qualified
    names, e.g. "lm_head") left in high precision, as FP8 training recipes leave the output layer.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        formats: tuple[str, ...],
        recipe: DelayedScaling = DelayedScaling(),
        matmul: str = "auto",
        keep: tuple[str, ...] = (),
    ) -> None:
        check_formats(formats)
        if type(model) is torch.nn.Linear:
            raise ValueError("FP8 conversion replaces the layers inside a model; wrap a lone nn.Linear first")
        self._slots: list[tuple[torch.nn.Module, str, torch.nn.Module, Fp8Linear]] = []
        for parent_name, parent in model.named_modules():
            for name, child in parent.named_children():
                qualified = f"{parent_name}.{name}" if parent_name else name
                if isinstance(child, torch.nn.Linear) and qualified not in keep:
                    self._slots.append((parent, name, child, Fp8Linear.from_linear(child, formats, recipe, matmul)))

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def layers(self) -> list[Fp8Linear]:
        return [layer for *_, layer in self._slots]

    def fp8(self) -> None:
        for parent, name, _, layer in self._slots:
            setattr(parent, name, layer)

    def original(self) -> None:
        for parent, name, linear, _ in self._slots:
            setattr(parent, name, linear)


def convert_to_fp8_linear(
    model: torch.nn.Module,
    formats: tuple[str, ...],
    recipe: DelayedScaling = DelayedScaling(),
    matmul: str = "auto",
    keep: tuple[str, ...] = (),
) -> int:
    """Replace every torch.nn.Linear inside `model` (except the modules named in `keep`), in
    place, by an Fp8Linear sharing its parameters; return how many were replaced.
    formats: (forward, gradient) format names, normally `DeviceInfo.fp8_formats`."""
    swap = Fp8LinearSwap(model, formats, recipe, matmul, keep)
    swap.fp8()
    return len(swap)
