"""Hooks other plugins (and this project's own tests) implement to extend rocm-validate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from rocm_validate.platform.devices import DeviceInfo
    from rocm_validate.results.metrics import Metric


@pytest.hookspec(firstresult=True)
def pytest_rocm_discover_devices(config: pytest.Config) -> list[DeviceInfo] | None:
    """Return the devices of this machine instead of probing them.

    The list must end with the CPU. Used to replay a device description recorded elsewhere,
    and by the plugin's own tests to stand in for hardware that is not present.
    """


@pytest.hookspec
def pytest_rocm_claim_outputs(config: pytest.Config) -> None:
    """Claim a plugin's own output files (`rocm_validate.core.outputs.claim`), with the run's
    report and summary, before any option can stop the run; keep what you claimed in your part of
    the run context (`run_state(config).put(...)`), which exists by then."""


@pytest.hookspec(firstresult=True)
def pytest_rocm_metric_finalize(item: pytest.Item, report: Any, metric: Metric) -> Metric | None:
    """Called once per recorded metric after the test's call phase, knowing its outcome.

    Return a replacement (e.g. with the verdict 'updated' once a baseline was written), or
    None to keep the metric as it is.
    """


@pytest.hookspec(firstresult=True)
def pytest_rocm_noise_band(
    config: pytest.Config, name: str, backend: str, dispersions: tuple[float | None, ...]
) -> tuple[float, str] | None:
    """How far (a fraction) two measurements of metric `name` on a `backend` device may differ
    before the difference is more than noise, given each one's relative spread (IQR / median,
    None where unmeasured); with how it was derived, for messages ('8.0% = max(min band 5.0%, ...)').

    The perf suite answers with its baseline gate's rule for the metric (`rocm_perf_thresholds`
    included), so a GPU compared with its peers, or a bandwidth with the next message size, gets
    the band a baseline comparison would. None: the metric is informational and not compared.
    """


@pytest.hookspec(firstresult=True)
def pytest_rocm_node_wide(config: pytest.Config, nodeid: str) -> bool | None:
    """Whether test `nodeid` is node-wide: in a whole-node run it runs once, on the first GPU's
    worker, after every GPU's own tests (the collectives suite; a verdict pooling every GPU's
    share of shared work). Answer True for your own tests, None otherwise; the controller asks
    with node ids alone (it collects nothing), so decide from the id.
    """
