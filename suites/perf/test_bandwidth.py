"""Memory bandwidth: device copy (read + write counted, as STREAM copy does) and pinned
host <-> device transfers over the host link."""

from __future__ import annotations

import pytest
import torch

MIB = 1024 * 1024
DEVICE_COPY_BYTES = {"full": 2048 * MIB, "tiny": 16 * MIB}
HOST_COPY_BYTES = 512 * MIB


def _random_bytes(count: int, device: torch.device) -> torch.Tensor:
    """Random bytes, so no link or memory compression can shortcut the copy."""
    tensor = torch.empty(count, dtype=torch.uint8, device=device)
    return tensor.random_(0, 256)


@pytest.mark.rocm_level("quick")
def test_device_copy_bandwidth(perf, torch_device) -> None:
    size = DEVICE_COPY_BYTES[perf.scale]
    source = _random_bytes(size, torch_device)
    target = torch.empty_like(source)
    measured = perf.measure(lambda: target.copy_(source))
    perf.throughput(f"copy.device.{size // MIB}mib", measured, 2.0 * size, "GB/s", peak="memory")
    assert torch.equal(target[-4096:], source[-4096:]), "the timed copy did not copy"


@pytest.mark.requires_gpu
@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_pinned_host_transfer_bandwidth(perf, torch_device, direction: str) -> None:
    device = _random_bytes(HOST_COPY_BYTES, torch_device)
    # Random bytes drawn on the GPU and copied in: drawing 512 MiB on the host is one CPU thread's
    # work (2-3 s a test), the copy 10 ms.
    host = torch.empty(HOST_COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    host.copy_(_random_bytes(HOST_COPY_BYTES, torch_device))
    source, target = (host, device) if direction == "h2d" else (device, host)
    measured = perf.measure(lambda: target.copy_(source, non_blocking=True))
    perf.throughput(
        f"copy.{direction}.pinned.{HOST_COPY_BYTES // MIB}mib",
        measured,
        float(HOST_COPY_BYTES),
        "GB/s",
        peak="host_link",
    )
    torch.cuda.synchronize()
    assert torch.equal(target[-4096:].cpu(), source[-4096:].cpu()), f"the timed {direction} copy did not copy"
