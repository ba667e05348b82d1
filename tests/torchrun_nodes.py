"""Two torchrun agents on this host (--nnodes 2, one process each), meeting through torchrun's own
c10d rendezvous as two nodes do: the tests of the rank programs across nodes share this."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def two_nodes(tmp_path: Path, program: list[str], timeout_s: float) -> tuple[list[int], str]:
    """Run `python -m <program...>` under two torchrun agents and wait for both (killing what is
    left after `timeout_s`); their exit statuses and their output, node 0's first."""
    torchrun = [
        *(sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1"),
        *("--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}", "--rdzv-id", "rocm-validate-test"),
        "-m",
        *program,
    ]
    logs = [tmp_path / f"node{n}.log" for n in range(2)]
    agents = [subprocess.Popen(torchrun, stdout=log.open("w"), stderr=subprocess.STDOUT) for log in logs]
    try:
        codes = [agent.wait(timeout=timeout_s) for agent in agents]
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
    return codes, "\n".join(log.read_text() for log in logs)
