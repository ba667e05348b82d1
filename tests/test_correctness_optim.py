"""The optimizers as defined (the float64 golden) and the optimizer check built on them."""

from __future__ import annotations

import math

import fake_devices
import pytest
import torch

from rocm_validate.correctness.optim_definitions import (
    AdamWConfig,
    AdamWDefinition,
    LambConfig,
    LambDefinition,
)
from rocm_validate.correctness.optimizers import (
    PARAM_SHAPES,
    check_adamw,
    check_lamb,
    gradient_stream,
    initial_params,
    run_torch_optimizer,
)

CPU = fake_devices.cpu()


def _assert_same_run(make_torch, reference, start, grads, tolerance: float) -> None:
    """The torch optimizer and the reference, fed the same float64 gradients, end equal."""
    params, _ = run_torch_optimizer(make_torch, start, grads, torch.float64, "cpu")
    for step in grads:
        reference.step(step)
    for p, r in zip(params, reference.params):
        torch.testing.assert_close(p, r, rtol=tolerance, atol=tolerance)


def test_reference_adamw_equals_torch_adamw_in_float64():
    c = AdamWConfig(lr=1e-2, weight_decay=0.1)
    start = initial_params(PARAM_SHAPES, seed=0)
    _assert_same_run(
        lambda ps: torch.optim.AdamW(
            ps, lr=c.lr, betas=(c.beta1, c.beta2), eps=c.eps, weight_decay=c.weight_decay, foreach=False
        ),
        AdamWDefinition(start, c),
        start,
        gradient_stream(PARAM_SHAPES, 20, seed=0),
        1e-13,
    )


def test_reference_lamb_without_weight_decay_or_clipping_is_adam():
    c = LambConfig(lr=1e-2, weight_decay=0.0, eps=1e-6)
    start = initial_params(PARAM_SHAPES, seed=1)
    # gradients with a global norm of about 0.2, below max_grad_norm: no clipping
    grads = [[g / 1000 for g in step] for step in gradient_stream(PARAM_SHAPES, 5, seed=1)]
    _assert_same_run(
        lambda ps: torch.optim.Adam(ps, lr=c.lr, betas=(c.beta1, c.beta2), eps=c.eps, foreach=False),
        LambDefinition(start, c),
        start,
        grads,
        1e-12,
    )


def test_reference_lamb_clips_the_global_gradient_norm():
    config = LambConfig(max_grad_norm=1.0)
    grads = [torch.tensor([3.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 4.0], dtype=torch.float64)]
    clipped = LambDefinition([torch.ones(2), torch.ones(2)], config)
    clipped.step(grads)  # global norm 5, so every gradient is divided by 5
    unclipped = LambDefinition([torch.ones(2), torch.ones(2)], config)
    unclipped.step([g / 5 for g in grads])
    assert all(torch.equal(a, b) for a, b in zip(clipped.params, unclipped.params))


def test_reference_lamb_scales_the_update_by_the_trust_ratio():
    config = LambConfig(lr=0.1, weight_decay=0.1, eps=1e-30)
    lamb = LambDefinition([torch.tensor([3.0, 4.0])], config)
    lamb.step([torch.tensor([0.6, 0.0])])
    update = torch.tensor([1.0 + 0.3, 0.0 + 0.4], dtype=torch.float64)  # sign(g) + weight_decay * p
    expected = torch.tensor([3.0, 4.0], dtype=torch.float64) - 0.1 * (5.0 / float(update.norm())) * update
    torch.testing.assert_close(lamb.params[0], expected, rtol=1e-14, atol=1e-14)


def test_fused_and_foreach_adamw_pass_on_the_cpu():
    results = check_adamw("fused", "float32", CPU, "cpu") + check_adamw("foreach", "bfloat16", CPU, "cpu")
    assert all(r.passed for r in results)
    assert len(results) == 2 * 3 * len(PARAM_SHAPES)


def test_an_unknown_adamw_variant_is_refused():
    with pytest.raises(ValueError, match="fused, foreach"):
        check_adamw("capturable", "float32", CPU, "cpu")


class _LambStandIn(torch.optim.Optimizer):
    """apex is not installed here: the float32 reference LAMB as a torch optimizer stands in for
    FusedLAMB, optionally with a wrong learning rate, to exercise the check both ways."""

    def __init__(self, params, config: LambConfig, lr_error: float = 1.0) -> None:
        super().__init__(params, {})
        self.params = list(params)
        self.inner = LambDefinition(
            self.params, LambConfig(**{**config.__dict__, "lr": config.lr * lr_error}), dtype=torch.float32
        )

    def step(self, closure=None):
        self.inner.step([p.grad for p in self.params])
        with torch.no_grad():
            for p, q in zip(self.params, self.inner.params):
                p.copy_(q)


def test_the_lamb_check_passes_a_correct_lamb_and_names_a_wrong_one():
    assert all(r.passed for r in check_lamb(lambda ps, c: _LambStandIn(ps, c), CPU, "cpu"))
    wrong = [r for r in check_lamb(lambda ps, c: _LambStandIn(ps, c, lr_error=1.01), CPU, "cpu") if not r.passed]
    assert wrong and wrong[0].check.startswith("lamb.param[0]") and "Mismatched elements" in wrong[0].message()
    assert math.isfinite(wrong[0].candidate_error)
