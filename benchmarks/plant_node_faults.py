"""Plant the two faults issue 34 asks a GPU run to show, as a pytest plugin loaded with -p:

    PYTHONPATH=benchmarks ROCM_VALIDATE_PLANT_SLOW_GPU=1 pytest -p plant_node_faults --rocm-device=all ...
    PYTHONPATH=benchmarks ROCM_VALIDATE_PLANT_HANG=<test id part> pytest -p plant_node_faults ...

* ROCM_VALIDATE_PLANT_SLOW_GPU=N (and ROCM_VALIDATE_PLANT_SLOWDOWN, default 1.08): every device-event timing
  taken on GPU N reads that much longer, as a GPU 8% slower than its peers would measure; the other GPUs are
  untouched. The peer comparison of a whole-node run should flag GPU N and the verdict name it with its BDF.
* ROCM_VALIDATE_PLANT_HANG=TEXT (and ROCM_VALIDATE_PLANT_HANG_GPU, default 0): the first test whose id
  contains TEXT, on that GPU, launches a kernel that spins for about ten minutes (torch.cuda._sleep) and
  waits for it: a hung kernel the timeout signal cannot interrupt, for the watchdog to report as `hang`.

Nothing here changes the GPU's settings; the faults live in this process only.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

SPIN_CYCLES = 10**12  # torch.cuda._sleep's argument: about 500-1000 s at 1-2 GHz


def _gpu(config: pytest.Config) -> int | None:
    """The GPU this process validates: a pinned worker's own, else the run's device."""
    from rocm_validate.core.session import run_state

    state = run_state(config)
    return state.device().index


def pytest_configure(config: pytest.Config) -> None:
    slow = os.environ.get("ROCM_VALIDATE_PLANT_SLOW_GPU")
    if slow is None:
        return
    from rocm_validate.perf import timing

    factor = float(os.environ.get("ROCM_VALIDATE_PLANT_SLOWDOWN", "1.08"))
    original = timing.DeviceEventClock.seconds_between

    def slowed(self: Any, start: Any, end: Any) -> float:
        seconds = original(self, start, end)
        return seconds * factor if _gpu(config) == int(slow) else seconds

    timing.DeviceEventClock.seconds_between = slowed  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    text = os.environ.get("ROCM_VALIDATE_PLANT_HANG")
    if (
        not text
        or text not in item.nodeid
        or _gpu(item.config) != int(os.environ.get("ROCM_VALIDATE_PLANT_HANG_GPU", "0"))
    ):
        return
    import torch

    torch.cuda._sleep(SPIN_CYCLES)
    torch.cuda.synchronize()  # waits in C: the timeout's SIGALRM handler cannot run, the watchdog ends it
