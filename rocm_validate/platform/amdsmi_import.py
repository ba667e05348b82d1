"""The amdsmi package, imported so that a mismatch with the node's ROCm never crashes a run.

The amdsmi wheel binds every symbol of `libamd_smi.so` when it is imported, so a wheel newer
than the node's library fails at import, and not with ImportError alone (KeyError,
AttributeError and OSError all happen). ROCm ships the copy that matches its own library under
`$ROCM_PATH/share/amd_smi`: that copy is preferred, an installed `amdsmi` package is the
fallback, and the copy in use is named in `AmdsmiModule.origin` (discovery puts it in the
device's `sources`). Install the extra that matches your ROCm: `pip install /opt/rocm/share/amd_smi`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from rocm_validate.platform.probing import one_line


@dataclass(frozen=True)
class AmdsmiModule:
    """The imported package, where it came from, and the copies that failed before it."""

    module: ModuleType
    origin: str  # "/opt/rocm/share/amd_smi" or "amdsmi 6.4.1 (installed package)"
    failures: tuple[str, ...] = ()


def rocm_copy(env: Mapping[str, str]) -> Path:
    """Where ROCm keeps the amdsmi package that matches its library."""
    return Path(env.get("ROCM_PATH") or "/opt/rocm") / "share" / "amd_smi"


def import_amdsmi(env: Mapping[str, str]) -> AmdsmiModule:
    """amdsmi from ROCm's own copy, else the installed package.

    Raises ModuleNotFoundError when neither exists, and ImportError naming each failed copy
    (with the exception its import raised, whatever its type) when none imports.
    """
    loaded = sys.modules.get("amdsmi")
    if loaded is not None:
        return AmdsmiModule(loaded, _origin(loaded, env))
    failures: list[str] = []
    init = rocm_copy(env) / "amdsmi" / "__init__.py"
    if init.is_file():
        try:
            return AmdsmiModule(_load(init), str(rocm_copy(env)))
        except Exception as exc:
            failures.append(f"{rocm_copy(env)}: {one_line(exc)}")
    try:
        module = importlib.import_module("amdsmi")
    except ModuleNotFoundError:
        if not failures:
            raise
    except Exception as exc:
        _forget_amdsmi()
        failures.append(f"installed amdsmi package: {one_line(exc)}")
    else:
        return AmdsmiModule(module, _origin(module, env), tuple(failures))
    raise ImportError("; ".join(failures))


def _load(init: Path) -> ModuleType:
    """Import the package whose __init__.py is `init` as `amdsmi` (its relative imports included)."""
    spec = importlib.util.spec_from_file_location("amdsmi", init, submodule_search_locations=[str(init.parent)])
    if spec is None or spec.loader is None:
        raise ImportError(f"no importable package at {init.parent}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["amdsmi"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        _forget_amdsmi()
        raise
    return module


def _forget_amdsmi() -> None:
    """Drop a half-imported amdsmi and its submodules, so the next copy starts clean."""
    for name in [n for n in sys.modules if n == "amdsmi" or n.startswith("amdsmi.")]:
        del sys.modules[name]


def _origin(module: ModuleType, env: Mapping[str, str]) -> str:
    location = Path(getattr(module, "__file__", None) or ".").resolve()
    copy = rocm_copy(env).resolve()
    if copy == location or copy in location.parents:
        return str(rocm_copy(env))
    try:
        return f"amdsmi {importlib.metadata.version('amdsmi')} (installed package)"
    except importlib.metadata.PackageNotFoundError:
        return f"amdsmi at {location.parent}"
