"""pytest side of the preflight suite: the host root (--rocm-host-root), the fixtures its tests
use, turning findings into an outcome, the RAS reading kept from the start of the run for the
end-of-run check, and the findings printed at the end of the run.

Imports only the standard library, pytest and torch-free project modules: preflight needs no
torch and no GPU runtime, only files and (for NVIDIA's ECC counters) nvidia-ml-py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rocm_validate.core import options
from rocm_validate.core.categorize import fail_as
from rocm_validate.core.session import run_state
from rocm_validate.core.suites import RUN_LAST_MARKER
from rocm_validate.errors import UsageError
from rocm_validate.preflight.checks import Finding
from rocm_validate.preflight.host import PciGpu, pci_gpus
from rocm_validate.results.report import FINDINGS_PROPERTY
from rocm_validate.results.triage import combine

HOST_ROOT = options.OptionSpec(
    "--rocm-host-root",
    "rocm_host_root",
    "ROCM_VALIDATE_HOST_ROOT",
    "folder the preflight suite reads the host's /proc, /sys and /dev from (default: /; e.g. the host's root "
    "mounted into a container)",
    "DIR",
)
HOST_FOLDERS = ("proc", "sys")  # what the checks read; dev/kmsg alone is often restricted


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_spec(parser, HOST_ROOT)


def resolve_host_root(config: pytest.Config) -> Path:
    """--rocm-host-root (or its twins), default '/'; a given folder must exist."""
    root = options.existing_folder(config, HOST_ROOT, "the folder that holds the host's proc/ and sys/")
    return Path("/") if root is None else root


@dataclass(frozen=True)
class HostRoot:
    """The preflight suite's part of the run context: the host's root folder, and whether
    --rocm-host-root (or its twins) named it."""

    root: Path
    given: bool


def pytest_configure(config: pytest.Config) -> None:
    given = options.raw_value(config, HOST_ROOT)[0] is not None
    run_state(config).put(HostRoot(resolve_host_root(config), given))
    config.addinivalue_line("markers", f"{RUN_LAST_MARKER}: run this test after every other test of the session")


def strict_root_problem(root: Path) -> str | None:
    """Under --rocm-strict, why a host root given explicitly cannot be checked (None when it can):
    without proc/ or sys/ every check reading them skips, and the run would validate nothing."""
    missing = [f"{name}/" for name in HOST_FOLDERS if not (root / name).is_dir()]
    if not missing:
        return None
    return (
        f"{HOST_ROOT.flag}={root} holds no {' and no '.join(missing)}, so the preflight checks that read them would "
        f"all skip and {options.STRICT_FLAG} would pass a host it never read: point it at the host's root with "
        f"proc/ and sys/ mounted (docker run -v /proc:/host/proc:ro -v /sys:/host/sys:ro ... "
        f"{HOST_ROOT.flag}=/host), or run without {options.STRICT_FLAG}"
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    """With preflight selected under --rocm-strict, refuse a given host root that holds nothing to check."""
    config = session.config
    state = run_state(config)
    settings, host_root = state.settings, state.part(HostRoot)
    if "preflight" not in settings.suites or not settings.strict or not host_root.given:
        return
    problem = strict_root_problem(host_root.root)
    if problem:
        raise UsageError(problem)


@dataclass(frozen=True)
class Host:
    """The host the preflight suite reads: its root folder and the GPUs on its PCI bus."""

    root: Path
    gpus: tuple[PciGpu, ...]
    problem: str = ""  # why the GPUs could not be listed

    @property
    def vendors(self) -> set[str]:
        return {g.vendor for g in self.gpus}


@pytest.fixture(scope="session")
def host(pytestconfig: pytest.Config) -> Host:
    """The host under --rocm-host-root (default /) and its GPUs, listed once."""
    root = run_state(pytestconfig).part(HostRoot).root
    gpus, problem = pci_gpus(root)
    return Host(root, tuple(gpus), problem)


def settle(item: pytest.Item, findings: Iterable[Finding]) -> None:
    """Record the findings on the test, then fail it if any failed (as the category they mean),
    skip it if none could be checked, and pass it otherwise (warnings are reported, not failed)."""
    __tracebackhide__ = True
    found = list(findings)
    item.user_properties.append((FINDINGS_PROPERTY, json.dumps([f.to_dict() for f in found])))
    failed = [f for f in found if f.status == "fail"]
    if failed:
        fail_as(combine(f.category for f in failed) or "configuration", "\n".join(f.line() for f in failed))
    if not found or all(f.status == "skip" for f in found):
        pytest.skip("; ".join(dict.fromkeys(f.found for f in found)) or "nothing to check")


@pytest.fixture
def preflight(request: pytest.FixtureRequest) -> Callable[..., None]:
    """preflight(*findings_or_lists): record this test's findings and settle its outcome."""

    def record(*findings: Finding | list[Finding]) -> None:
        __tracebackhide__ = True
        settle(request.node, [f for entry in findings for f in (entry if isinstance(entry, list) else [entry])])

    return record


@dataclass
class RasAtStart:
    """The GPUs' error counters as read at the start of the run, in this process."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    taken: bool = False


@pytest.fixture(scope="session")
def ras_at_start() -> RasAtStart:
    """Filled by the first RAS check; the end-of-run check compares with it."""
    return RasAtStart()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Every preflight finding, one line each: what the host is, not only what failed."""
    findings = [f for r in run_state(config).results.values() if r.suite == "preflight" for f in r.findings]
    if not findings:
        return
    terminalreporter.write_sep("=", "rocm-validate preflight")
    for f in findings:
        terminalreporter.write_line(
            f"{f['status']:>4}  {f['check']} ({f.get('subject') or 'host'}): {f['found']}; expected {f['expected']}",
            red=f["status"] == "fail",
            yellow=f["status"] == "warn",
        )
