"""The pytest-xdist scheduler of a whole-node run (imported only when pytest-xdist runs one).

Like xdist's `--dist each`, every worker runs the tests it collected; each worker collected only
its own work (`node/work.py`: per-GPU tests on every GPU's main worker, a shared test on one GPU,
the convergence suite's training in the GPU's beside worker). On top of that:

* **Node-wide tests** (the collectives suite, the convergence verdicts that pool every GPU's runs)
  are held back and sent once, to the first GPU's main worker, when every other worker has
  finished and that worker is on its last test of its own: nothing else runs on the node while
  the collectives measure it, and a pooled verdict sees every GPU's share.
* **Timed tests wait for the beside lane.** A main worker runs its GPU's untimed tests first;
  from its first timed test (the perf suite) on, its tests are sent only once the beside worker
  of the same GPU has finished and its process has exited (the controller tells it to exit as
  soon as it finishes), so no measurement shares its GPU.

A crashed worker is replaced by xdist from the same spec (so pinned to the same GPU and lane); as
with `--dist each`, the replacement takes over the remaining tests of the one it replaces, and
what was held back for that GPU is sent to it when due.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler.each import EachScheduling

from rocm_validate.core.plan import BESIDE, MAIN

EXIT_WAIT_S = 30.0  # how long a finished beside worker's process may take to exit before timing starts


def process_ended(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether process `pid` is gone (or a zombie: it holds no GPU context any more)."""
    status = proc / str(pid) / "stat"
    try:
        text = status.read_text()
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    return text.rsplit(")", 1)[-1].split()[:1] == ["Z"]


def wait_for_exit(pid: int | None, timeout_s: float = EXIT_WAIT_S) -> bool:
    """Wait (bounded) until process `pid` has ended; True when it has (or is unknown)."""
    if pid is None:
        return True
    deadline = time.monotonic() + timeout_s
    while not process_ended(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def end_process(worker: Any) -> None:
    """Tell a worker that has finished to exit now. An execnet worker process lives until its
    gateway is told to exit, which xdist does for every worker at the end of the run: waiting for
    a finished beside worker's exit without this always ran out the whole EXIT_WAIT_S (30 s per
    beside worker, the controller blocked meanwhile)."""
    teardown = getattr(worker, "ensure_teardown", None)
    if teardown is None:
        return
    with contextlib.suppress(OSError, EOFError, ValueError):  # its connection is gone: it is ending already
        teardown()


class NodeScheduling(EachScheduling):
    """`--dist each` over each worker's own collection; node-wide tests once, last, on the lead
    main worker; a main worker's timed tests after its GPU's beside worker."""

    def __init__(
        self,
        config: pytest.Config,
        log: Any,
        node_wide: Callable[[str], bool],
        timing: Callable[[str], bool],
        role: Callable[[Any], tuple[str, str]],
        lead_gpu: str,
    ) -> None:
        super().__init__(config, log)
        self._node_wide = node_wide
        self._timing = timing
        self._role = role  # worker -> (GPU, lane)
        self._lead_gpu = lead_gpu
        self._held: list[int] | None = None  # node-wide test indices (lead's collection) not yet sent
        self._later: dict[str, list[int]] = {}  # per GPU: the main worker's timed tests not yet sent
        self._seen: set[tuple[str, str]] = set()  # (GPU, lane) of every worker started so far
        self._ended: set[str] = set()  # GPUs whose beside worker has finished and exited

    @property
    def tests_finished(self) -> bool:
        return bool(super().tests_finished) and not self._held and not any(self._later.values())

    def _is_lead(self, worker: Any) -> bool:
        return self._role(worker) == (self._lead_gpu, MAIN)

    def _beside_gpus(self) -> set[str]:
        return {gpu for gpu, lane in self._seen if lane == BESIDE}

    def schedule(self) -> None:
        assert self.collection_is_completed
        fresh = [worker for worker in self.node2pending if worker not in self._started]
        for worker in fresh:
            self._seen.add(self._role(worker))
        for worker in fresh:
            pending = self.node2pending[worker]
            gpu, lane = self._role(worker)
            if pending:  # a replacement: it runs what the crashed worker had left
                worker.send_runtest_some(list(pending))
            elif (gpu, lane) not in self._started_roles():
                self._first_start(worker, gpu, lane)
            self._started.append(worker)
            self._shutdown_if_done(worker)
        self._release()

    def _started_roles(self) -> set[tuple[str, str]]:
        return {self._role(n) for n in self._started}

    def _first_start(self, worker: Any, gpu: str, lane: str) -> None:
        collection = self.node2collection[worker]
        wide = [i for i, nodeid in enumerate(collection) if self._node_wide(nodeid)]
        if self._is_lead(worker):
            self._held = wide
        own = [i for i in range(len(collection)) if i not in set(wide)]
        if lane == MAIN and gpu in self._beside_gpus():
            first_timed = next((k for k, i in enumerate(own) if self._timing(collection[i])), len(own))
            own, self._later[gpu] = own[:first_timed], own[first_timed:]
        self.node2pending[worker][:] = own
        if own:
            worker.send_runtest_some(list(own))

    def _waiting_for(self, worker: Any) -> bool:
        """Whether more tests may still be sent to `worker`."""
        gpu, lane = self._role(worker)
        if lane != MAIN:
            return False
        return bool(self._later.get(gpu)) or (bool(self._held) and self._is_lead(worker))

    def _shutdown_if_done(self, worker: Any) -> None:
        if not self._waiting_for(worker):
            worker.shutdown()

    def mark_test_complete(self, worker: Any, item_index: int, duration: float = 0) -> None:
        super().mark_test_complete(worker, item_index, duration)
        self._release()

    def remove_node(self, worker: Any) -> str | None:
        gpu, lane = self._role(worker)
        crashed = super().remove_node(worker)
        if lane == BESIDE and worker not in self._removed2pending and not crashed:
            end_process(worker)
            wait_for_exit((getattr(worker, "workeroutput", None) or {}).get("pid"))
            self._ended.add(gpu)
        self._release()
        return crashed

    def _release(self) -> None:
        """Send each main worker its timed tests once its GPU's beside worker has ended, then the
        node-wide tests to the lead once every other worker is done and the lead holds at most
        its last test (a worker keeps its last test until told what follows)."""
        if self._removed2pending:
            return
        mains = {self._role(n)[0]: n for n in self.node2pending if self._role(n)[1] == MAIN and n in self._started}
        for gpu, later in self._later.items():
            worker = mains.get(gpu)
            if not later or worker is None or gpu not in self._ended or len(self.node2pending[worker]) > 1:
                continue
            self._later[gpu] = []
            self.node2pending[worker].extend(later)
            worker.send_runtest_some(later)
            self._shutdown_if_done(worker)
        if not self._held or any(self._later.values()) or not self._beside_gpus() <= self._ended:
            return
        lead = next((n for n in self.node2pending if self._is_lead(n) and n in self._started), None)
        if lead is None or len(self.node2pending[lead]) > 1:
            return
        if any(pending for worker, pending in self.node2pending.items() if worker is not lead):
            return
        held, self._held = self._held, []
        self.node2pending[lead].extend(held)
        lead.send_runtest_some(held)
        lead.shutdown()
