"""Compile once: Inductor's FX graph and AOT autograd caches in one folder, shared by every
pinned worker of a run and found again by the next run (`--rocm-compile-cache`).

torch.compile caches what it compiled (FX graphs, AOT autograd graphs, Triton kernels) under
`TORCHINDUCTOR_CACHE_DIR` when `TORCHINDUCTOR_FX_GRAPH_CACHE` and `TORCHINDUCTOR_AUTOGRAD_CACHE`
are on; the keys hold the graph, torch, Triton and the device's arch, so GPUs of one SKU share
entries and another stack never reads them. Inductor reads these variables when it is imported,
so they are set in the pytest process at session start, once every option was read and before any
worker (or collectives rank) starts, and every process of the run inherits them. A warm cache turns a 60 s compile of the
BERT-L step into seconds; the compile-time metric says which it was (`compile_cache`).

Imports only the standard library and pytest; torch's counters are read only when asked for.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocm_validate.core.options import OptionSpec, add_spec, raw_value, writable_folder_problem
from rocm_validate.core.session import STATE_KEY, find_part, is_xdist_worker, run_state
from rocm_validate.errors import UsageError

OFF = "off"
COMPILE_CACHE = OptionSpec(
    "--rocm-compile-cache",
    "rocm_compile_cache",
    "ROCM_VALIDATE_COMPILE_CACHE",
    "folder for torch.compile's caches, shared by the run's workers and kept for the next run "
    "(default: ~/.cache/rocm-validate/inductor, or TORCHINDUCTOR_CACHE_DIR when set); 'off' compiles everything cold",
    "DIR|off",
)
CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"
SWITCHES = ("TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE")
# Inductor's counters (torch._dynamo.utils.counters) of cache hits and misses, by group.
HITS = (("inductor", "fxgraph_cache_hit"), ("aot_autograd", "autograd_cache_hit"))
MISSES = (("inductor", "fxgraph_cache_miss"), ("aot_autograd", "autograd_cache_miss"))


@dataclass(frozen=True)
class CompileCache:
    """Where this run's compile caches live; `folder` None: caches off (every compile cold)."""

    folder: Path | None
    source: str  # the option or variable that chose it, or 'default'

    def environment(self, scratch: Path | None = None) -> dict[str, str]:
        """The variables every process of the run gets. Off: the caches switched off and Inductor's
        files in `scratch`, a folder of this run alone, so nothing compiled before is reused."""
        if self.folder is None:
            return {**dict.fromkeys(SWITCHES, "0"), **({CACHE_VARIABLE: str(scratch)} if scratch else {})}
        return {CACHE_VARIABLE: str(self.folder), **dict.fromkeys(SWITCHES, "1")}

    def clear_command(self) -> str:
        return shlex.join(["rm", "-rf", str(self.folder)]) if self.folder else ""


def default_folder(env: Mapping[str, str], home: Path) -> Path:
    """~/.cache/rocm-validate/inductor, or under $XDG_CACHE_HOME when it is set."""
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home / ".cache"
    return base / "rocm-validate" / "inductor"


def resolve(value: str | None, source: str, env: Mapping[str, str], home: Path) -> CompileCache:
    """The cache of this run: the option (command line > environment > ini), else a
    TORCHINDUCTOR_CACHE_DIR already set, else the default folder; 'off' switches the caches off."""
    if value is not None and value.strip():
        text = value.strip()
        if text.lower() == OFF:
            return CompileCache(None, source)
        return CompileCache(Path(text).expanduser().resolve(), source)
    if env.get(CACHE_VARIABLE):
        return CompileCache(Path(env[CACHE_VARIABLE]).expanduser().resolve(), f"{CACHE_VARIABLE} (environment)")
    return CompileCache(default_folder(env, home).resolve(), "default")


@dataclass(frozen=True)
class CacheContents:
    """What the cache folder held when the run started."""

    files: int
    bytes: int

    @property
    def warm(self) -> bool:
        return self.files > 0

    def describe(self) -> str:
        if not self.warm:
            return "empty: this run compiles cold"
        return f"warm: {self.files} files, {self.bytes / 2**20:.0f} MiB"


def contents(folder: Path) -> CacheContents:
    """Files and bytes under `folder` (none when it does not exist)."""
    files = size = 0
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                size += (Path(root) / name).stat().st_size
            except OSError:
                continue
            files += 1
    return CacheContents(files, size)


def cache_state(before: Mapping[str, int], after: Mapping[str, int]) -> str:
    """'warm' (every graph from the cache), 'cold' (every graph compiled), 'partly warm', or
    'not cached' (no cache lookup: caches off or bypassed), from Inductor's counters around a compile."""
    hits = sum(after.get(k, 0) - before.get(k, 0) for k in ("fxgraph_cache_hit", "autograd_cache_hit"))
    misses = sum(after.get(k, 0) - before.get(k, 0) for k in ("fxgraph_cache_miss", "autograd_cache_miss"))
    if hits and misses:
        return "partly warm"
    if hits:
        return "warm"
    return "cold" if misses else "not cached"


def compile_counts() -> dict[str, int]:
    """Inductor's cache counters in this process now (zeros before torch._dynamo is imported)."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    counters = getattr(dynamo, "counters", None) or {}
    return {name: int(counters.get(group, {}).get(name, 0)) for group, name in (*HITS, *MISSES)}


class CompileWatch:
    """Inductor's cache hits and misses over a block: `with CompileWatch() as watch: ...`, then
    `watch.state` ('warm', 'cold', ...) and `watch.extra()` for a metric's `extra`."""

    def __enter__(self) -> CompileWatch:
        self.before = compile_counts()
        self.after = dict(self.before)
        return self

    def __exit__(self, *exc: object) -> None:
        self.after = compile_counts()

    @property
    def state(self) -> str:
        return cache_state(self.before, self.after)

    def extra(self) -> dict[str, object]:
        counts = {name: self.after[name] - self.before[name] for name in self.after}
        return {
            "compile_cache": self.state,
            "compile_cache_counts": counts,
            "compile_cache_dir": os.environ.get(CACHE_VARIABLE),
        }


# --- wiring --------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    add_spec(parser, COMPILE_CACHE)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Choose the cache and set Inductor's variables for every process of a run of the suites,
    after every plugin's configure (one that stops the run leaves them unset); pytest-xdist starts
    its workers, which inherit them, and pytest's terminal prints the header (`header_line`) in
    their own sessionstart, both trylast, so after this one."""
    config = session.config
    if is_xdist_worker(config) or not _runs_suites(config):
        return
    value, source = raw_value(config, COMPILE_CACHE)
    cache = resolve(value, source, os.environ, Path.home())
    scratch = None
    if cache.folder is not None:
        problem = writable_folder_problem(cache.folder)
        if problem:
            raise UsageError(
                f"{source}={value or cache.folder}: cannot keep compile caches there: {problem}; choose a writable "
                f"folder with {COMPILE_CACHE.flag}=DIR, or {COMPILE_CACHE.flag}=off"
            )
        run_state(config).put(contents(cache.folder))
    else:
        scratch = Path(tempfile.mkdtemp(prefix="rocm-validate-inductor-"))
    os.environ.update(cache.environment(scratch))
    _configure_inductor_if_imported(cache.folder is not None)
    run_state(config).put(cache)


def _runs_suites(config: pytest.Config) -> bool:
    from rocm_validate.core.suites import touches_suites

    state = config.stash.get(STATE_KEY, None)
    return state is not None and (
        state.settings.suite_given or touches_suites(list(config.args), config.invocation_params.dir, config.rootpath)
    )


def _configure_inductor_if_imported(on: bool) -> None:
    """Inductor read its variables when it was imported; if something imported it already, set
    its switches directly (the folder is read at each use)."""
    inductor = sys.modules.get("torch._inductor.config")
    functorch = sys.modules.get("torch._functorch.config")
    if inductor is not None:
        inductor.fx_graph_cache = on  # type: ignore[attr-defined]
    if functorch is not None:
        functorch.enable_autograd_cache = on  # type: ignore[attr-defined]


def header_line(config: pytest.Config) -> str | None:
    """'rocm-validate compile cache: DIR (warm: 412 files, 38 MiB); clear it with: rm -rf DIR'."""
    cache = find_part(config, CompileCache)
    if cache is None:
        return None
    if cache.folder is None:
        return f"rocm-validate compile cache: off ({cache.source}): every torch.compile compiles cold"
    found = find_part(config, CacheContents) or CacheContents(0, 0)
    return f"rocm-validate compile cache: {cache.folder} ({found.describe()}); clear it with: {cache.clear_command()}"


def report_section(config: pytest.Config) -> dict[str, object] | None:
    """The cache as the JSON report records it: folder, and how full it was at the start."""
    cache = find_part(config, CompileCache)
    if cache is None:
        return None
    found = find_part(config, CacheContents)
    return {
        "folder": None if cache.folder is None else str(cache.folder),
        "source": cache.source,
        "at_start": None if found is None else ("warm" if found.warm else "empty"),
        "files_at_start": None if found is None else found.files,
    }


def pytest_report_header(config: pytest.Config) -> list[str]:
    line = header_line(config)
    return [line] if line else []
