"""The optimizers from their definitions: AdamW as torch.optim defines it, LAMB as apex FusedLAMB does.

The suite runs a fused or foreach optimizer on the device and these definitions on float64 copies
of the same parameters and gradients (the golden), then compares parameters and state. Run in a
low precision, the same code is the plain reference whose error scales the tolerance.
Written as plain tensor arithmetic, one parameter at a time, so each line can be checked against
the papers (AdamW: Loshchilov & Hutter 2019; LAMB: You et al. 2020) and apex's kernels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AdamWConfig:
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 1e-2


class _Moments:
    """Copies of the parameters (float64 unless told otherwise) with Adam's two moments."""

    def __init__(self, params: Sequence[torch.Tensor], dtype: torch.dtype) -> None:
        self.dtype = dtype
        self.params = [p.detach().to(dtype=dtype, copy=True) for p in params]
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = 0


class AdamWDefinition(_Moments):
    """AdamW: decoupled weight decay, bias-corrected moments (torch.optim.AdamW)."""

    def __init__(self, params: Sequence[torch.Tensor], config: AdamWConfig, dtype: torch.dtype = torch.float64) -> None:
        super().__init__(params, dtype)
        self.config = config

    def step(self, grads: Sequence[torch.Tensor]) -> None:
        c = self.config
        self.steps += 1
        correction1 = 1 - c.beta1**self.steps
        correction2 = 1 - c.beta2**self.steps
        for p, m, v, grad in zip(self.params, self.exp_avg, self.exp_avg_sq, grads):
            g = grad.to(device=p.device, dtype=self.dtype)
            p.mul_(1 - c.lr * c.weight_decay)
            m.mul_(c.beta1).add_((1 - c.beta1) * g)
            v.mul_(c.beta2).add_((1 - c.beta2) * g * g)
            denominator = (v / correction2).sqrt() + c.eps
            p.sub_(c.lr * (m / correction1) / denominator)


@dataclass(frozen=True)
class LambConfig(AdamWConfig):
    """apex FusedLAMB's defaults: AdamW-mode decay, bias correction, global grad-norm clip at 1."""

    eps: float = 1e-6
    max_grad_norm: float = 1.0
    use_nvlamb: bool = False  # apply the trust ratio also to parameters without weight decay


class LambDefinition(_Moments):
    """LAMB in float64 with apex FusedLAMB's semantics.

    Gradients are divided by max(1, global_norm / max_grad_norm); the update is the bias-corrected
    Adam direction plus weight_decay * p; it is scaled by the trust ratio ||p|| / ||update||
    (1 when either norm is 0, or when weight_decay is 0 and use_nvlamb is off).
    """

    def __init__(self, params: Sequence[torch.Tensor], config: LambConfig, dtype: torch.dtype = torch.float64) -> None:
        super().__init__(params, dtype)
        self.config = config

    def step(self, grads: Sequence[torch.Tensor]) -> None:
        c = self.config
        self.steps += 1
        cast = [g.to(device=p.device, dtype=self.dtype) for p, g in zip(self.params, grads)]
        global_norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in cast))
        clip = global_norm / c.max_grad_norm if global_norm > c.max_grad_norm else 1.0
        correction1 = 1 - c.beta1**self.steps
        correction2 = 1 - c.beta2**self.steps
        for p, m, v, g in zip(self.params, self.exp_avg, self.exp_avg_sq, cast):
            g = g / clip
            m.mul_(c.beta1).add_((1 - c.beta1) * g)
            v.mul_(c.beta2).add_((1 - c.beta2) * g * g)
            update = (m / correction1) / ((v / correction2).sqrt() + c.eps) + c.weight_decay * p
            ratio = 1.0
            if c.use_nvlamb or c.weight_decay != 0:
                p_norm, u_norm = float(p.norm()), float(update.norm())
                if p_norm > 0 and u_norm > 0:
                    ratio = p_norm / u_norm
            p.sub_(c.lr * ratio * update)
