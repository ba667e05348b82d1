"""pytest side of shared work (`node/work.py`): the `rocm_shared` marker, each test's kind of
work (per GPU, shared, node-wide) recorded with its outcome, what each worker of a whole-node run
keeps, and the `rocm_share` fixture that tells a split test its part.

Imports only the standard library, pytest and torch-free project modules.
"""

from __future__ import annotations

import os

import pytest

from rocm_validate.core.plan import MAIN
from rocm_validate.core.session import SUITE_KEY, is_xdist_worker
from rocm_validate.core.suites import NODE_WIDE_SUITES, suite_of_nodeid
from rocm_validate.errors import UsageError
from rocm_validate.node.plan import worker_part
from rocm_validate.node.work import (
    NODE_WIDE,
    PER_GPU,
    SHARED,
    SHARED_MARKER,
    SHARED_MARKER_HELP,
    Share,
    SharedSpec,
    SharedTest,
    assign_shared,
    kept_by,
    shared_spec,
)
from rocm_validate.results.report import WORK_PROPERTY


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", SHARED_MARKER_HELP)
    if is_xdist_worker(config):
        config.workeroutput["pid"] = os.getpid()  # type: ignore[attr-defined]  # the scheduler waits for it to exit


def pytest_rocm_node_wide(config: pytest.Config, nodeid: str) -> bool | None:
    """The node-wide suites' tests (the collectives)."""
    return True if suite_of_nodeid(nodeid, config.rootpath) in NODE_WIDE_SUITES else None


def work_kind(item: pytest.Item) -> str:
    """'node-wide', 'shared' or 'per-gpu' for a collected test."""
    if item.config.hook.pytest_rocm_node_wide(config=item.config, nodeid=item.nodeid):
        return NODE_WIDE
    return SHARED if item.get_closest_marker(SHARED_MARKER) is not None else PER_GPU


def _spec(item: pytest.Item) -> SharedSpec:
    marker = item.get_closest_marker(SHARED_MARKER)
    assert marker is not None
    try:
        return shared_spec(marker.args, marker.kwargs)
    except ValueError as exc:
        raise UsageError(f"{item.nodeid}: {exc}") from None


@pytest.hookimpl(trylast=True)  # after pytest's own -k / -m (its mark plugin) and the run's selection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Record each test's kind of work; in a worker of a whole-node run, keep only this worker's
    work (after every other selection, so every worker places the same shared tests)."""
    kinds = {item.nodeid: work_kind(item) for item in items}
    for item in items:
        item.user_properties.append((WORK_PROPERTY, kinds[item.nodeid]))
    plan = worker_part(config)
    if plan is None or plan.gpu is None:
        return
    specs = {item.nodeid: _spec(item) for item in items if kinds[item.nodeid] == SHARED}
    placed = assign_shared(
        [SharedTest(nodeid, spec.seconds, spec.group) for nodeid, spec in specs.items() if not spec.split],
        len(plan.devices),
    )
    position = plan.position
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        keep = kept_by(
            kinds[item.nodeid],
            item.stash.get(SUITE_KEY, None),
            plan.lane,
            plan.beside,
            placed.get(item.nodeid),
            position,
            lead=position == 0 and plan.lane == MAIN,
        )
        (kept if keep else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


@pytest.fixture(scope="session")
def rocm_share(pytestconfig: pytest.Config) -> Share:
    """This GPU's part of split shared work (`rocm_shared(split=True)`): position and count of the
    GPUs in a whole-node run; the whole of it (0 of 1) elsewhere."""
    plan = worker_part(pytestconfig)
    if plan is None or plan.gpu is None:
        return Share()
    return Share(plan.position, len(plan.devices))
