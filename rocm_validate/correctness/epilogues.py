"""Fused GEMM epilogues: a dense layer's bias and activation computed inside the GEMM, against
float64 with the activation each path claims.

BERT-L's MLPerf runs fuse its FFN's bias and GELU into the GEMM (apex's FusedDense and
FusedDenseGeluDense, the BLAS-Lt epilogues PyTorch reaches through `torch._addmm_activation`,
Inductor's epilogue fusion). Each path computes one particular GELU, and the two differ by up to
4.7e-4 (at |z| = 2.7): far beyond float32's rounding, within bf16's, so the golden must be the
GELU the path claims, and a path computing the other one fails in float32 and leans in bf16:

| path | candidate | GELU it claims | source |
| --- | --- | --- | --- |
| `addmm_gelu` | `torch._addmm_activation(b, x, W^T, use_gelu=True)` | tanh on GPUs, erf on the CPU | pytorch#104061 (cuBLASLt's GELU epilogue is the tanh approximation, and every GPU path of the op follows it); the CPU kernel applies the exact GELU (erf to 8e-15 in float64, measured here) |
| `addmm_relu` | the same with `use_gelu=False` | ReLU | |
| `compiled_gelu`, `compiled_gelu_tanh` | `torch.compile(F.gelu(F.linear(x, W, b), approximate=...))` | the one asked | F.gelu's `approximate` |
| `apex_dense` | `apex.fused_dense.FusedDense` | none (bias epilogue) | |
| `apex_dense_gelu_dense` | `apex.fused_dense.FusedDenseGeluDense` | tanh | its GEMM uses the BLAS-Lt `GELU_AUX_BIAS` epilogue (apex csrc/fused_dense_cuda.cu), the tanh approximation; apex's own test compares it with erf at atol 1e-3, which cannot tell the two apart |

`torch._addmm_activation` has no autograd formula, so its epilogues are checked forward only;
the others forward and backward (every parameter's gradient and the input's).

Golden: the chain of dense layers in float64 from the definitions (x W^T + b; GELU through erfc
or tanh, as the building blocks define them), gradients by float64 autograd of that definition.
Magnitudes: the same chain run on absolute values, each activation replaced by |a(z)| + |a'(z)| M
forward and |a'(z)| + |a''(z)| M backward (M the pre-activation's own magnitude |x||W|^T + |b|),
so every output and gradient element is bounded by the terms that make it, including an error in
z carried through the activation's slope and curvature.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from rocm_validate.correctness.blocks import _gelu_golden, _gelu_tanh_golden
from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.platform.devices import DeviceInfo
from rocm_validate.workloads.shapes import gemm_problem

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu_erf": _gelu_golden,
    "gelu_tanh": _gelu_tanh_golden,
    "relu": lambda z: torch.clamp(z, min=0.0),
    "none": lambda z: z,
}
EAGER = {  # the unfused eager op of each activation: the low-precision reference
    "gelu_erf": lambda z: F.gelu(z),
    "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
    "relu": F.relu,
    "none": lambda z: z,
}
APEX_INSTALL = "NVIDIA/apex or ROCm/apex built with its fused_dense CUDA / HIP extension (--cuda_ext)"

Layers = list[tuple[torch.Tensor, torch.Tensor, str]]  # (weight [out, in], bias [out], activation after it)


@dataclass(frozen=True)
class EpiloguePath:
    """A fused dense path: what it runs, the activation it claims on a device, and whether it
    has a backward."""

    name: str
    widths: tuple[str, ...]  # the BERT-L layers it spans: "ffn_up" (1024 -> 4096), "ffn_down" (4096 -> 1024)
    claims: Callable[[DeviceInfo], tuple[str, ...]]  # the activation after each layer
    backward: bool
    library: str = ""  # "apex" for paths that need it


def _addmm_claim(device: DeviceInfo) -> tuple[str, ...]:
    return ("gelu_tanh" if device.is_gpu else "gelu_erf",)


PATHS: dict[str, EpiloguePath] = {
    path.name: path
    for path in (
        EpiloguePath("addmm_gelu", ("ffn_up",), _addmm_claim, backward=False),
        EpiloguePath("addmm_relu", ("ffn_up",), lambda d: ("relu",), backward=False),
        EpiloguePath("compiled_gelu", ("ffn_up",), lambda d: ("gelu_erf",), backward=True),
        EpiloguePath("compiled_gelu_tanh", ("ffn_up",), lambda d: ("gelu_tanh",), backward=True),
        EpiloguePath("apex_dense", ("ffn_up",), lambda d: ("none",), backward=True, library="apex"),
        EpiloguePath(
            "apex_dense_gelu_dense", ("ffn_up", "ffn_down"), lambda d: ("gelu_tanh", "none"), True, library="apex"
        ),
    )
}


def _draw_layers(
    path: EpiloguePath, dtype: torch.dtype, device: torch.device | str, is_gpu: bool, seed: int
) -> tuple[Any, Layers]:
    """x [tokens, hidden] and each layer's W, b at BERT-L's FFN widths (tokens and widths / 16
    on a CPU), standard normal, W scaled by 1 / sqrt(in) so activations stay of order one."""
    g = torch.Generator(device=device).manual_seed(seed)
    first = gemm_problem(f"bert-large.{path.widths[0]}", is_gpu)
    x = torch.randn(first.m, first.k, generator=g, device=device).to(dtype)
    layers = []
    for width in path.widths:
        problem = gemm_problem(f"bert-large.{width}", is_gpu)
        w = (torch.randn(problem.n, problem.k, generator=g, device=device) / problem.k**0.5).to(dtype)
        b = (0.5 * torch.randn(problem.n, generator=g, device=device)).to(dtype)
        layers.append((w, b, "none"))
    return x, layers


def _chain(x: torch.Tensor, layers: Layers, activations: dict[str, Callable[[torch.Tensor], torch.Tensor]]) -> Any:
    for w, b, activation in layers:
        x = activations[activation](x @ w.t() + b)
    return x


class _ActivationMagnitude(torch.autograd.Function):
    """|a(z)| + |a'(z)| m forward, grad (|a'(z)| + |a''(z)| m) backward: the terms an activation's
    output and its gradient carry, given the pre-activation's magnitude m (see the module doc)."""

    @staticmethod
    def forward(ctx: Any, m: torch.Tensor, z: torch.Tensor, activation: str) -> torch.Tensor:
        with torch.enable_grad():
            leaf = z.detach().requires_grad_(True)
            out = ACTIVATIONS[activation](leaf)
            (slope,) = torch.autograd.grad(out.sum(), leaf, create_graph=True)
            curvature = torch.autograd.grad(slope.sum(), leaf)[0] if slope.requires_grad else torch.zeros_like(leaf)
        ctx.save_for_backward(slope.detach().abs(), curvature.abs(), m)
        return out.detach().abs() + slope.detach().abs() * m

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        slope, curvature, m = ctx.saved_tensors
        return grad * (slope + curvature * m), None, None


def golden_and_magnitudes(
    x: torch.Tensor, layers: Layers, upstream: torch.Tensor, backward: bool
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The chain's output and gradients in float64 from the definitions, and their magnitudes."""
    leaves = [x.double().requires_grad_(backward)]
    golden_layers = []
    for w, b, activation in layers:
        wd, bd = w.double().requires_grad_(backward), b.double().requires_grad_(backward)
        leaves += [wd, bd]
        golden_layers.append((wd, bd, activation))
    out = _chain(leaves[0], golden_layers, ACTIVATIONS)
    golden = {"out": out.detach()}
    abs_leaves = [t.detach().abs().requires_grad_(backward) for t in leaves]
    m, z_in = abs_leaves[0], leaves[0].detach()
    for index, (wd, bd, activation) in enumerate(golden_layers):
        m = m @ abs_leaves[1 + 2 * index].t() + abs_leaves[2 + 2 * index]
        z = z_in @ wd.detach().t() + bd.detach()
        if activation != "none":
            m = _ActivationMagnitude.apply(m, z, activation)
        z_in = ACTIVATIONS[activation](z)
    sizes = {"out": m.detach()}
    if backward:
        names = _grad_names(len(layers))
        for name, grad in zip(names, torch.autograd.grad(out, leaves, upstream.double())):
            golden[name] = grad
        for name, grad in zip(names, torch.autograd.grad(m, abs_leaves, upstream.double().abs())):
            sizes[name] = grad
    return golden, sizes


def _grad_names(count: int) -> list[str]:
    suffix = [""] if count == 1 else [str(i + 1) for i in range(count)]
    return ["grad_x"] + [f"grad_{p}{s}" for s in suffix for p in ("weight", "bias")]


# --- the candidates -------------------------------------------------------------------------------


def _addmm_candidate(use_gelu: bool) -> Callable[[torch.Tensor, Layers], torch.Tensor]:
    def run(x: torch.Tensor, layers: Layers) -> torch.Tensor:
        ((w, b, _),) = layers
        return torch._addmm_activation(b, x, w.t(), use_gelu=use_gelu)

    return run


def _compiled_candidate(approximate: str) -> Callable[[torch.Tensor, Layers], torch.Tensor]:
    def dense_gelu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.gelu(F.linear(x, w, b), approximate=approximate)

    def run(x: torch.Tensor, layers: Layers) -> torch.Tensor:
        ((w, b, _),) = layers
        return torch.compile(dense_gelu, fullgraph=True, dynamic=False)(x, w, b)

    return run


def _apex_candidate(module_name: str) -> Callable[[torch.Tensor, Layers], torch.Tensor]:
    """apex's fused dense module with the drawn parameters (weights as leaves of the caller's)."""

    def run(x: torch.Tensor, layers: Layers) -> torch.Tensor:
        from rocm_validate.platform.libraries import import_library

        fused_dense = import_library("apex.fused_dense", APEX_INSTALL)
        shapes = [layers[0][0].shape[1], *(w.shape[0] for w, _, _ in layers)]
        module = getattr(fused_dense, module_name)(*shapes).to(device=x.device, dtype=x.dtype)
        names = ("weight", "bias") if len(layers) == 1 else ("weight1", "bias1", "weight2", "bias2")
        tensors = [t for w, b, _ in layers for t in (w, b)]
        return torch.func.functional_call(module, dict(zip(names, tensors)), (x,))

    return run


CANDIDATES: dict[str, Callable[[torch.Tensor, Layers], torch.Tensor]] = {
    "addmm_gelu": _addmm_candidate(True),
    "addmm_relu": _addmm_candidate(False),
    "compiled_gelu": _compiled_candidate("none"),
    "compiled_gelu_tanh": _compiled_candidate("tanh"),
    "apex_dense": _apex_candidate("FusedDense"),
    "apex_dense_gelu_dense": _apex_candidate("FusedDenseGeluDense"),
}


def _run(
    run: Callable[[torch.Tensor, Layers], torch.Tensor],
    x: torch.Tensor,
    layers: Layers,
    upstream: torch.Tensor,
    backward: bool,
) -> dict[str, torch.Tensor]:
    """A path's output and (with `backward`) its gradients, named as the golden's."""
    leaves = [x.detach().requires_grad_(backward)]
    own: Layers = []
    for w, b, activation in layers:
        w, b = w.detach().requires_grad_(backward), b.detach().requires_grad_(backward)
        leaves += [w, b]
        own.append((w, b, activation))
    out = run(leaves[0], own)
    found = {"out": out.detach()}
    if backward:
        found.update(zip(_grad_names(len(layers)), torch.autograd.grad(out, leaves, upstream)))
    return found


def check_epilogue(
    name: str, dtype: str, device: DeviceInfo, torch_device: torch.device, seed: int = 0
) -> list[Comparison]:
    """One fused path in `dtype` against the float64 chain with the activation it claims: the
    output and (where the path has a backward) every gradient, each bounded by its row
    (`epilogue.out`, `epilogue.grad`) and measured against the unfused eager chain in `dtype`."""
    path = PATHS[name]
    torch_dtype = getattr(torch, dtype)
    x, layers = _draw_layers(path, torch_dtype, torch_device, device.is_gpu, seed)
    layers = [(w, b, claimed) for (w, b, _), claimed in zip(layers, path.claims(device))]
    g = torch.Generator(device=torch_device).manual_seed(seed + 1)
    out_width = layers[-1][0].shape[0]
    upstream = torch.randn(x.shape[0], out_width, generator=g, device=torch_device).to(torch_dtype)
    candidate = _run(CANDIDATES[name], x, layers, upstream, path.backward)
    reference = _run(lambda xs, ls: _chain(xs, ls, EAGER), x, layers, upstream, path.backward)
    golden, sizes = golden_and_magnitudes(x, layers, upstream, path.backward)
    claimed = "+".join(a for _, _, a in layers)
    shape = "x".join(str(s) for s in (x.shape[0], *(w.shape[1] for w, _, _ in layers), out_width))
    results = []
    for part, gold in golden.items():
        kind = "out" if part == "out" else "grad"
        terms = sum(w.shape[1] for w, _, _ in layers) if kind == "out" else x.shape[0] + out_width
        results.append(
            compare(
                f"epilogue.{name}.{part} [{shape}, {dtype}, claims {claimed}]",
                candidate[part],
                gold,
                tolerance_for(f"epilogue.{kind}", device.backend, device.arch, dtype=dtype),
                reference[part],
                magnitude=sizes[part],
                terms=terms,
            )
        )
    return results
