"""Smoke checks of the platform itself: the FP8 formats it claims exist, models build and train."""

from __future__ import annotations

import math

import pytest
import torch


@pytest.mark.rocm_level("quick")
def test_every_fp8_format_the_device_claims_exists_in_torch(rocm_device, torch_device):
    for name in rocm_device.fp8_formats:
        dtype = getattr(torch, f"float8_{name}")
        values = torch.tensor([1.0, -2.0, 0.5], device=torch_device)
        assert torch.equal(values.to(dtype).float(), values), f"{name} cannot hold 1, -2 and 0.5 exactly"


@pytest.mark.parametrize("name", ["bert-large", "bert-base", "llama-3.1-8b"])
def test_tiny_model_takes_a_training_step_that_lowers_its_loss(model_builder, name):
    build = model_builder(name, scale="tiny", seed=0)
    model = build.model.train()
    batch = build.make_batch(4, seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(3):
        loss = model(**batch).loss
        assert math.isfinite(loss.item()), f"{name}: loss is {loss.item()} before any update"
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    assert losses[-1] < losses[0], f"{name}: loss did not fall over 3 steps on one batch: {losses}"
