"""A test that ends the process: `os._exit(0)` inside a test would end pytest with exit status 0
and no verdict, report, summary or JUnit, which a CI gate reads as success. While a test runs,
`os._exit` called from pytest's own process is intercepted: from the test's thread it fails the
test, naming it, and the run goes on; from another thread, where no exception reaches the test,
the process still ends, but never with status 0, and says which test ended it. Forked children
(multiprocessing) and non-zero statuses from other threads (the watchdog's) exit as asked.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Generator
from typing import Any, NoReturn

import pytest


class EndedTheProcess(RuntimeError):
    """A test called os._exit: the exception that fails it instead."""


def guarded_exit(
    real: Callable[[int], NoReturn], nodeid: str, pid: int, uncapture: Callable[[], None] = lambda: None
) -> Callable[[int], NoReturn]:
    """os._exit as it behaves while `nodeid` runs in process `pid`; `uncapture` gives the
    terminal's stderr back (pytest captures the test's) before the last line is written."""

    def _exit(status: int) -> NoReturn:
        if os.getpid() != pid:
            real(status)
        if threading.current_thread() is threading.main_thread():
            raise EndedTheProcess(
                f"{nodeid} called os._exit({status}), which would end pytest with exit status {status} and no verdict, "
                "report, summary or JUnit; the test fails instead and the run goes on"
            )
        if status == 0:
            uncapture()
            sys.stderr.write(
                f"\nrocm-validate: {nodeid} ended the process with os._exit(0) from a thread: no verdict was written; "
                "exit status 1\n"
            )
            sys.stderr.flush()
            real(1)
        real(status)

    return _exit


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, Any, Any]:
    real = os._exit
    capture = item.config.pluginmanager.getplugin("capturemanager")

    def uncapture() -> None:
        if capture is not None:
            capture.suspend_global_capture(in_=False)

    os._exit = guarded_exit(real, item.nodeid, os.getpid(), uncapture)  # type: ignore[assignment]
    try:
        return (yield)
    finally:
        os._exit = real
