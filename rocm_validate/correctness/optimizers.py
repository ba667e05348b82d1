"""Optimizer checks: a device optimizer against the float64 reference over many steps.

Parameters start from the same seeded values; every step feeds the same seeded gradients
(rounded to the parameter dtype, so the reference sees exactly what the device saw). After the
last step parameters and optimizer state are compared: candidate = the fused or foreach kernel,
low-precision reference = torch's for-loop implementation in the same dtype, golden = float64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from rocm_validate.correctness.compare import Comparison, compare
from rocm_validate.correctness.optim_definitions import (
    AdamWConfig,
    AdamWDefinition,
    LambConfig,
    LambDefinition,
)
from rocm_validate.correctness.tolerances import tolerance_for
from rocm_validate.platform.devices import DeviceInfo

# Shapes of a small transformer block's parameters, odd sizes included (tails of vector loops).
PARAM_SHAPES: tuple[tuple[int, ...], ...] = ((256, 64), (256,), (64, 256), (7, 13), (1,))
ADAMW_VARIANTS = ("fused", "foreach")
STEPS = 20


def initial_params(shapes: Sequence[tuple[int, ...]], seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g, dtype=torch.float64) for shape in shapes]


def gradient_stream(shapes: Sequence[tuple[int, ...]], steps: int, seed: int) -> list[list[torch.Tensor]]:
    """steps lists of gradients, decaying like a real run's, drawn on the CPU in float64."""
    g = torch.Generator().manual_seed(seed + 1)
    return [[torch.randn(*s, generator=g, dtype=torch.float64) / (1 + t) ** 0.5 for s in shapes] for t in range(steps)]


def run_torch_optimizer(
    make: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
    start: Sequence[torch.Tensor],
    grads: Sequence[Sequence[torch.Tensor]],
    dtype: torch.dtype,
    device: torch.device | str,
) -> tuple[list[torch.Tensor], torch.optim.Optimizer]:
    """Run a torch optimizer over the gradient stream; returns its parameters and itself."""
    params: list[torch.Tensor] = [torch.nn.Parameter(p.to(device=device, dtype=dtype, copy=True)) for p in start]
    optimizer = make(params)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.to(device=device, dtype=dtype)
        optimizer.step()
    return [p.detach() for p in params], optimizer


def _adamw(config: AdamWConfig, **variant: bool) -> Callable[[list[torch.Tensor]], torch.optim.Optimizer]:
    def make(params: list[torch.Tensor]) -> torch.optim.Optimizer:
        return torch.optim.AdamW(
            params,
            lr=config.lr,
            betas=(config.beta1, config.beta2),
            eps=config.eps,
            weight_decay=config.weight_decay,
            **variant,
        )

    return make


def _optimizer_state(optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor], key: str) -> list[torch.Tensor]:
    return [optimizer.state[p][key] for p in optimizer.param_groups[0]["params"]][: len(params)]


def _compare_run(
    label: str,
    detail: str,
    candidate: dict[str, Sequence[torch.Tensor]],
    reference: dict[str, Sequence[torch.Tensor]],
    golden: dict[str, Sequence[torch.Tensor]],
    tolerance_keys: dict[str, str],
    device: DeviceInfo,
) -> list[Comparison]:
    """One comparison per tensor of each named quantity (param, exp_avg, exp_avg_sq)."""
    results = []
    for name, key in tolerance_keys.items():
        tolerance = tolerance_for(key, device.backend, device.arch)
        results += [
            compare(f"{label}.{name}[{i}] {tuple(g.shape)} ({detail})", c, g, tolerance, r)
            for i, (c, r, g) in enumerate(zip(candidate[name], reference[name], golden[name]))
        ]
    return results


_STATE_KEYS = ("exp_avg", "exp_avg_sq")


def check_adamw(
    variant: str, dtype: str, device: DeviceInfo, torch_device: torch.device, seed: int = 0
) -> list[Comparison]:
    """torch.optim.AdamW(fused=True) or (foreach=True) vs float64 over STEPS steps: parameters,
    exp_avg and exp_avg_sq of every tensor; the for-loop AdamW in the same dtype is the reference."""
    if variant not in ADAMW_VARIANTS:
        raise ValueError(f"AdamW variant must be one of {', '.join(ADAMW_VARIANTS)}, found {variant!r}")
    torch_dtype = getattr(torch, dtype)
    config = AdamWConfig(lr=1e-2, weight_decay=0.1)
    start = [p.to(torch_dtype) for p in initial_params(PARAM_SHAPES, seed)]
    grads = [[g.to(torch_dtype) for g in step] for step in gradient_stream(PARAM_SHAPES, STEPS, seed)]
    flags = {"fused": variant == "fused", "foreach": variant == "foreach"}
    fast_params, fast = run_torch_optimizer(_adamw(config, **flags), start, grads, torch_dtype, torch_device)
    loop_params, loop = run_torch_optimizer(
        _adamw(config, fused=False, foreach=False), start, grads, torch_dtype, torch_device
    )
    golden = AdamWDefinition(start, config)
    for step_grads in grads:
        golden.step(step_grads)
    return _compare_run(
        f"adamw[{variant}]",
        f"{dtype}, after {STEPS} steps",
        {"param": fast_params, **{k: _optimizer_state(fast, fast_params, k) for k in _STATE_KEYS}},
        {"param": loop_params, **{k: _optimizer_state(loop, loop_params, k) for k in _STATE_KEYS}},
        {"param": golden.params, "exp_avg": golden.exp_avg, "exp_avg_sq": golden.exp_avg_sq},
        {"param": "adamw.param", "exp_avg": "adamw.state", "exp_avg_sq": "adamw.state"},
        device,
    )


def check_lamb(
    make: Callable[[list[torch.Tensor], LambConfig], torch.optim.Optimizer],
    device: DeviceInfo,
    torch_device: torch.device,
    seed: int = 0,
) -> list[Comparison]:
    """A fused LAMB (e.g. apex FusedLAMB) in float32 vs LambDefinition in float64 over STEPS steps;
    the same reference run in float32 on the device is the low-precision reference."""
    config = LambConfig(lr=1e-2, weight_decay=0.1)
    start = [p.float() for p in initial_params(PARAM_SHAPES, seed)]
    grads = [[g.float() for g in step] for step in gradient_stream(PARAM_SHAPES, STEPS, seed)]
    fused_params, _fused = run_torch_optimizer(lambda ps: make(ps, config), start, grads, torch.float32, torch_device)
    plain = LambDefinition([p.to(torch_device) for p in start], config, dtype=torch.float32)
    golden = LambDefinition(start, config)
    for step_grads in grads:
        plain.step(step_grads)
        golden.step(step_grads)
    return _compare_run(
        "lamb",
        f"float32, after {STEPS} steps",
        {"param": fused_params},
        {"param": plain.params},
        {"param": golden.params},
        {"param": "lamb.param"},
        device,
    )
