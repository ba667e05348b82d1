"""Starts a collectives world on this host (from pytest): one `python -m rocm_validate.collectives`
process per rank, joined by torch's own rendezvous.

The launcher plays the part torchrun's agent plays: it hosts the world's TCPStore on a free port
of 127.0.0.1 and starts every rank with MASTER_ADDR / MASTER_PORT pointing at it and
TORCHELASTIC_USE_AGENT_STORE=True, so each rank's `env://` init joins as a client, exactly as
under torchrun. Through the same store it watches each rank's progress, and it ends the group
itself, so a run always ends with every rank named:

* a rank that exits with an error while the others are still working died: the others get a
  short grace to give up, then are stopped, and the dead rank is named first;
* when the ranks that were waiting give up (their collective timed out) and a rank is still
  running, that rank hung: it is stopped and named first;
* no progress at all for twice the collective timeout and 30 s (every rank stuck) stops them all.

Every rank's output is kept in a log file per rank, named in the notes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from rocm_validate.collectives.outcome import JOIN_FAILED, WorldOutcome, summarize
from rocm_validate.collectives.plan import Plan, WorldSpec
from rocm_validate.collectives.rank import (
    EXIT_USAGE,
    RUN_ID_VARIABLE,
    progress_key,
    result_key,
    store_prefix,
)
from rocm_validate.core.plan import NODE_GPU_VARIABLE
from rocm_validate.text import clip

POLL_S = 0.2
STARTUP_S = 180.0  # importing torch and initialising a GPU runtime on a busy node
# No progress on any rank for this long ends the group: past every rank's own collective
# timeout, with room for a loaded host to let the ranks that timed out report and exit.
STALL_FACTOR, STALL_SLACK_S = 2.0, 30.0
_NOT_FOR_RANKS = (NODE_GPU_VARIABLE,)  # a pinned pytest worker's own marker


@dataclass
class _Watch:
    """What the launcher has seen of the ranks so far."""

    ranks: int
    started: float = field(default_factory=time.monotonic)
    progress: dict[int, str] = field(default_factory=dict)
    last_change: float = field(default_factory=time.monotonic)
    first_end: float | None = None
    died: int | None = None  # the rank whose death ended the group
    notes: dict[int, str] = field(default_factory=dict)  # culprits first


def rank_env(base: Mapping[str, str], world: WorldSpec, rank: int, port: int, run_id: str) -> dict[str, str]:
    """A rank's environment: the world's visibility, its place, and the launcher's store."""
    env = {k: v for k, v in base.items() if k not in _NOT_FOR_RANKS}
    env.update(dict(world.visibility))
    env.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "WORLD_SIZE": str(world.size),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world.size),
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            RUN_ID_VARIABLE: run_id,
        }
    )
    return env


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return clip(lines[-1], 300) if lines else ""


def _exit_text(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit status {code}"


def launch(
    plan: Plan, world: WorldSpec, env: Mapping[str, str], log_dir: Path, startup_s: float = STARTUP_S
) -> WorldOutcome:
    """Run `plan` on `world` ranks of this host; always returns, with every rank's result or the
    reason it has none."""
    results, notes = run_ranks(
        "rocm_validate.collectives", plan.arguments(), plan.timeout_s, world, env, log_dir, startup_s=startup_s
    )
    return summarize(results, world.labels, world.library, notes)


def run_ranks(
    program: str,
    arguments: list[str],
    timeout_s: float,
    world: WorldSpec,
    env: Mapping[str, str],
    log_dir: Path,
    keys: str = "",
    startup_s: float = STARTUP_S,
) -> tuple[list[dict[str, Any] | None], dict[int, str]]:
    """Start `python -m program arguments` on every rank of `world` and supervise them; each rank's
    published result (under the run's prefix + `keys`, None where it gave none) and the notes
    naming the ranks that died, hung or could not join, culprits first."""
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=timeout_s + 30), wait_for_workers=False)
    run_id = uuid.uuid4().hex
    prefix = store_prefix({RUN_ID_VARIABLE: run_id}) + keys
    log_dir.mkdir(parents=True, exist_ok=True)
    logs = [log_dir / f"rank{r}.log" for r in range(world.size)]
    command = [sys.executable, "-m", program, *arguments, "--backend", world.library]
    processes = []
    try:
        for rank in range(world.size):
            with logs[rank].open("w") as log:
                processes.append(
                    subprocess.Popen(
                        command,
                        env=rank_env(env, world, rank, store.port, run_id),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        watch = _supervise(processes, store, prefix, world, timeout_s, startup_s, logs)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    return [_published(store, result_key(prefix, r)) for r in range(world.size)], watch.notes


def _published(store: Any, key: str) -> dict[str, Any] | None:
    return json.loads(store.get(key)) if store.check([key]) else None


def _supervise(
    processes: list[subprocess.Popen[bytes]],
    store: Any,
    prefix: str,
    world: WorldSpec,
    timeout_s: float,
    startup_s: float,
    logs: list[Path],
) -> _Watch:
    """Poll until every rank has ended, stopping (and naming) the ones that cannot end by themselves."""
    watch = _Watch(world.size)
    grace_s = min(10.0, timeout_s)
    while True:
        now = time.monotonic()
        codes = [p.poll() for p in processes]
        for rank in range(world.size):
            key = progress_key(prefix, rank)
            seen = store.get(key).decode() if store.check([key]) else None
            if seen is not None and watch.progress.get(rank) != seen:
                watch.progress[rank], watch.last_change = seen, now
        running = [r for r, code in enumerate(codes) if code is None]
        ended = [r for r, code in enumerate(codes) if code is not None]
        if ended and watch.first_end is None:
            watch.first_end = now
            dead = [r for r in ended if codes[r] != 0]
            if dead and now - watch.last_change < 0.8 * timeout_s:  # before any peer could time out
                watch.died = dead[0]
        for rank in ended:
            code = codes[rank]
            if code and rank not in watch.notes:
                where = watch.progress.get(rank, "startup")
                tail = _last_line(logs[rank])
                what = f"{JOIN_FAILED} ({_exit_text(code)})" if code == EXIT_USAGE else f"died with {_exit_text(code)}"
                watch.notes[rank] = f"{what} in {where}" + (f": {tail}" if tail else "") + f" (log {logs[rank]})"
        if not running:
            break
        if watch.first_end is not None and now - watch.first_end > grace_s:
            _stop(processes, running, watch, world, "hung")
            break
        if len(watch.progress) < world.size and now - watch.started > startup_s:
            missing = [r for r in running if r not in watch.progress]
            for rank in missing:
                watch.notes[rank] = f"did not start within {startup_s:g} s (log {logs[rank]})"
            _stop(processes, running, watch, world, "stalled")
            break
        if len(watch.progress) == world.size and now - watch.last_change > STALL_FACTOR * timeout_s + STALL_SLACK_S:
            _stop(processes, running, watch, world, "stalled")
            break
        time.sleep(POLL_S)
    if watch.died is not None:  # the rank whose death ended the group is named first
        watch.notes = {watch.died: watch.notes[watch.died], **watch.notes}
    return watch


def _stop(
    processes: list[subprocess.Popen[bytes]], running: list[int], watch: _Watch, world: WorldSpec, why: str
) -> None:
    """Stop the ranks still running; a hung rank is a culprit (named before the ranks that gave
    up waiting for it), a rank stopped after another died is not."""
    culprits = {}
    for rank in running:
        processes[rank].kill()
        if rank in watch.notes:
            continue
        where = watch.progress.get(rank, "startup")
        if watch.died is not None:
            watch.notes[rank] = f"stopped by the launcher in {where} after {world.labels[watch.died]} died"
        elif why == "hung":
            culprits[rank] = (
                f"hung in {where}: still running after the other ranks gave up waiting; stopped by the launcher"
            )
        else:
            culprits[rank] = (
                f"hung in {where}: no progress on any rank for {time.monotonic() - watch.last_change:.0f} s; stopped"
            )
    watch.notes = {**culprits, **watch.notes}
