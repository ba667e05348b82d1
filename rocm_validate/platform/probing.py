"""How discovery runs a probe that may raise anything: the failure becomes one line, never a crash.

Native libraries (amdsmi, NVML, HIP through torch) raise whatever their bindings raise, so every
probe of the platform layer goes through `ProbeErrors.run`, and every message about a failure
is worded by `one_line`: the exception's type and the first line of its text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


def one_line(exc: BaseException) -> str:
    """'KeyError: AMDSMI_LIB_VERSION_MAJOR': the type and the first line of the message."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


@dataclass
class ProbeErrors:
    """The failures of one discovery, in the order they happened ('probe: Type: message')."""

    messages: list[str] = field(default_factory=list)

    def run(self, probe: str, function: Callable[[], T], default: Any = None) -> T | Any:
        """Run one probe; anything it raises becomes a message, never a crash."""
        try:
            return function()
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            self.messages.append(f"{probe}: {one_line(exc)}")
            return default
