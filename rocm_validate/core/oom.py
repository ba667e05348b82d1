"""Out-of-memory failures, the one path for every suite: recognised without importing torch,
described as need vs found, and released before the next test.

An OOM inside one test fails that test with a message a person can act on and must not poison
the tests after it: the message is built outside the `except` block (so the failed frames and
their tensors can be freed), and `free_device_memory` returns the caching allocator's blocks in
the test's teardown.
"""

from __future__ import annotations

import gc
import re
import sys
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pytest

_TRIED = re.compile(r"Tried to allocate ([0-9.]+ [KMGT]?i?B)")
GIB = 1024**3


@dataclass(frozen=True)
class MemoryFacts:
    """The device's memory when an allocation failed (bytes; None where unknown)."""

    free: int | None
    total: int | None
    allocated: int | None  # held by PyTorch's tensors
    reserved: int | None  # held by PyTorch's caching allocator


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError (CUDA and HIP alike), without importing torch."""
    torch = sys.modules.get("torch")
    error = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    return error is not None and isinstance(exc, error)


def _gib(value: int | None) -> str:
    return "unknown" if value is None else f"{value / GIB:.2f} GiB"


def describe_oom(where: str, message: str, facts: MemoryFacts) -> str:
    """'out of device memory in <test>: needed 2.00 GiB more, found 1.20 GiB free of 79.10 GiB ...'."""
    match = _TRIED.search(message)
    need = f"needed {match.group(1)} more" if match else "an allocation failed"
    return (
        f"out of device memory in {where}: {need}, found {_gib(facts.free)} free of {_gib(facts.total)} "
        f"(PyTorch held {_gib(facts.allocated)} in tensors, {_gib(facts.reserved)} reserved). "
        "Run this test alone, on a device with more memory, or with other processes stopped; "
        "the tests after it run with the memory released"
    )


def memory_facts() -> MemoryFacts:
    """The current device's memory, read through torch (all None without a GPU)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return MemoryFacts(None, None, None, None)
    try:
        free, total = torch.cuda.mem_get_info()
        return MemoryFacts(int(free), int(total), int(torch.cuda.memory_allocated()), int(torch.cuda.memory_reserved()))
    except RuntimeError:
        return MemoryFacts(None, None, None, None)


def free_device_memory() -> None:
    """Collect unreachable tensors and hand cached blocks back, so the next test starts clean."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


_OOM_KEY = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """An out-of-memory error fails its test with need vs found, without the traceback."""
    message = ""
    try:
        return (yield)
    except BaseException as exc:
        if not is_out_of_memory(exc):
            raise
        item.stash[_OOM_KEY] = True
        message = describe_oom(item.nodeid, str(exc), memory_facts())
    pytest.fail(message, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, Any]:
    """After an out-of-memory failure: hand the memory back so the next test starts clean."""
    try:
        return (yield)
    finally:
        if item.stash.get(_OOM_KEY, False):
            free_device_memory()
