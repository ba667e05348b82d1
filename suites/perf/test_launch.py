"""Kernel launch latency of an empty kernel: host cost per launch back-to-back, a launch
followed by a synchronize, and the per-kernel cost inside a replayed CUDA/HIP graph."""

from __future__ import annotations

import pytest
import torch

from rocm_validate.perf.timing import HostClock


def _empty_kernel() -> None:
    torch.cuda._sleep(0)  # a kernel that spins for zero cycles: pure launch cost


def _launch_and_wait() -> None:
    _empty_kernel()
    torch.cuda.synchronize()


@pytest.mark.rocm_level("quick")
@pytest.mark.requires_gpu
def test_empty_kernel_launch_latency(perf, torch_device) -> None:
    host = HostClock(torch.cuda.synchronize)
    back_to_back = perf.measure(_empty_kernel, clock=host, round_s=0.01)
    round_trip = perf.measure(_launch_and_wait, clock=host, round_s=0.01)
    in_graph = perf.measure(_empty_kernel, graph=True, round_s=0.01)
    launch = perf.latency("launch.empty_kernel.host_us", back_to_back)
    wait = perf.latency("launch.empty_kernel.sync_us", round_trip)
    perf.latency("launch.empty_kernel.graph_us", in_graph)
    assert launch.value < wait.value, (
        f"a launch alone ({launch.value:.2f} us) should cost less than a launch and a synchronize ({wait.value:.2f} us)"
    )
