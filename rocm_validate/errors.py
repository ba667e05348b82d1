"""Every error rocm-validate raises on purpose, under one base class, `RocmValidateError`.

Three families, by what the person reading the message has to do:

* `UsageError`: the request is wrong (an option, a marker, a device index, a model name, a
  ruleset). It is also pytest's own `UsageError`, so a pytest run stops with exit status 4 and
  one line, no traceback; the `rocm-validate` command exits 2.
* `DataFileError`: a stored file (baseline, RCP, report) cannot be read, trusted or written.
  The message names the file and the command that restores it.
* `PlatformRefusal`: the device or library declines a case (no kernel for this shape, a BLAS
  library that cannot be selected). Tests turn it into a skip that states need vs found.

Anything else that escapes is a bug in rocm-validate or in the stack under test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

__all__ = [
    "BackendRefused",
    "BaselineError",
    "BlasUnavailable",
    "CommandError",
    "DataFileError",
    "DeviceError",
    "JsonFileError",
    "LibraryMissing",
    "MarkerUsageError",
    "MlperfError",
    "ModelBuildError",
    "PlatformRefusal",
    "RcpUnavailable",
    "ReferenceFailed",
    "RocmValidateError",
    "ToolOutputError",
    "UnknownCheckError",
    "UsageError",
]


class RocmValidateError(Exception):
    """Base of every error rocm-validate raises on purpose."""


# pytest's UsageError is typed final, but subclassing it is how a plugin's usage error gets exit
# status 4; the type checker sees a plain Exception there.
if TYPE_CHECKING:
    _PytestUsageError = Exception
else:
    _PytestUsageError = pytest.UsageError


class UsageError(RocmValidateError, _PytestUsageError):
    """The request is wrong; the message says what was expected, what was found and the fix."""


class DeviceError(UsageError):
    """The device asked for (an index, a GPU build's GPU) is not usable in this process."""


class MarkerUsageError(UsageError):
    """A requirement marker was written with arguments it cannot take."""


class ModelBuildError(UsageError):
    """A model build was asked for something that does not exist."""


class MlperfError(UsageError):
    """An MLPerf request is wrong: no such folder, unknown ruleset, unreadable RCP file."""


class CommandError(UsageError):
    """A `rocm-validate` command cannot do what was asked: one line on stderr, exit status 2."""


class UnknownCheckError(UsageError, LookupError):
    """A check name has no row in the tolerance table."""


class DataFileError(RocmValidateError):
    """A stored file cannot be used; the message names it and how to restore it."""


class JsonFileError(DataFileError):
    """A JSON file is missing its schema, unreadable, or cannot be written."""


class BaselineError(DataFileError):
    """A baseline file cannot be used (corrupt, renamed, locked by another run)."""


class RcpUnavailable(DataFileError):
    """No usable mini-BERT RCPs for this device and benchmark definition: missing or stale."""


class ReferenceFailed(RocmValidateError):
    """The reference configuration did not give usable RCPs; nothing was written."""


class ToolOutputError(RocmValidateError):
    """A vendor tool printed something none of the known formats matches."""


class PlatformRefusal(RocmValidateError):
    """The device or a library declined a case; the message says what it refused and why."""


class BackendRefused(PlatformRefusal):
    """An SDPA backend declined the case (PyTorch found no kernel for it)."""


class LibraryMissing(PlatformRefusal):
    """An optional library is not installed at all (one that is installed but broken raises its
    own error: that is a failure of the stack, not a reason to skip)."""

    def __init__(self, package: str, install: str = "") -> None:
        super().__init__(f"{package} is not installed" + (f" ({install})" if install else ""))
        self.package = package
        self.install = install


class BlasUnavailable(PlatformRefusal):
    """PyTorch did not switch to the asked BLAS library (not built in, or not on this arch)."""
