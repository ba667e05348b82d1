"""Training steps the perf suite times: one optimizer step of a model build on a fixed batch,
under bf16 autocast with fused AdamW, as MLPerf-style pretraining runs them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rocm_validate.workloads.models import ModelBuild

GIB = 1024**3

# TimingPlan changes for a training step (0.1-0.3 s on a GPU): ten or so steps per window after
# warm-up until three consecutive steps agree within 2%; three steps of a tiny model on the CPU.
# The figure is the window's mean step rate, so its noise is that of the window mean (sustained):
# the spread of blocks of two or three steps overstates it about threefold. Four runs of the FP8
# Llama step on one H100 VM agreed within 1.2% while their blocks spread 0.6-2.1%, which set a
# 5% band and hid a 5% slowdown (docs/perf.md).
STEP_PLANS: dict[str, dict[str, Any]] = {
    "full": dict(window_s=2.0, min_rounds=8, warmup_min_s=0.5, warmup_max_s=3.0, steady_tolerance=0.02, sustained=True),
    "tiny": dict(min_rounds=3),
}


@dataclass
class TrainingSetup:
    """A model in training mode, its fused AdamW, one resident batch and the eager step."""

    build: ModelBuild
    batch_size: int
    batch: dict[str, Any]
    optimizer: Any
    step: Callable[[], Any]

    @property
    def label(self) -> str:
        """'bert-large' at full size, 'bert-large-tiny' on the CPU: names never mix the two."""
        return self.build.name if self.build.scale == "full" else f"{self.build.name}-{self.build.scale}"

    @property
    def flops_per_step(self) -> float:
        return self.batch_size * self.build.flops_per_sample


def training_step(model: Any, batch: dict[str, Any], optimizer: Any) -> Callable[[], Any]:
    """step() runs forward (bf16 autocast), backward and the optimizer; returns the detached loss."""
    import torch

    device_type = next(model.parameters()).device.type

    def step() -> Any:
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def training_setup(
    build: ModelBuild, batch_size: int, lr: float = 1e-4, batch: dict[str, Any] | None = None
) -> TrainingSetup:
    """Fused AdamW over the build's parameters and its batch (or `batch`, e.g. packed sequences),
    resident on the device."""
    import torch

    model = build.model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    if batch is None:
        batch = build.make_batch(batch_size, seed=0)
    else:
        batch = {key: value.to(build.device, non_blocking=True) for key, value in batch.items()}
    return TrainingSetup(build, batch_size, batch, optimizer, training_step(model, batch, optimizer))


def peak_memory_gib(step: Callable[[], Any]) -> float:
    """Most device memory PyTorch held during one call of step, in GiB."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / GIB
