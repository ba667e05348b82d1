"""Optional libraries of the stack (apex, torchao, Transformer Engine): importing one tells a
library that is not installed (a platform limit: skip) from one that is installed but cannot be
used (a broken stack: fail)."""

from __future__ import annotations

import importlib
from types import ModuleType

from rocm_validate.errors import LibraryMissing


def import_library(module: str, install: str = "") -> ModuleType:
    """Import `module` of an optional library; LibraryMissing when its top-level package is not
    installed. Every other import error (a missing submodule or dependency, an ABI or driver
    mismatch, a failing extension) propagates."""
    package = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == package:
            raise LibraryMissing(package, install) from None
        raise


def installed(package: str) -> bool:
    """Whether top-level `package` can be imported, found without importing it (cheap enough to
    decide at collection, e.g. how long a test that needs it is expected to take)."""
    import importlib.util

    return importlib.util.find_spec(package) is not None


def expected_seconds(package: str, seconds: float, missing_s: float = 1.0) -> float:
    """`seconds` where `package` is installed; `missing_s` where it is not (its tests skip at once)."""
    return seconds if installed(package) else missing_s
