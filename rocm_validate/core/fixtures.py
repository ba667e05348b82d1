"""Fixtures: thin handles on the run state; the logic lives in devices, models and metrics."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from rocm_validate.core.session import PENDING_METRICS_KEY, SUITE_KEY, run_state
from rocm_validate.results.metrics import Verdict

if TYPE_CHECKING:
    from rocm_validate.platform.devices import DeviceInfo
    from rocm_validate.results.metrics import Metric
    from rocm_validate.workloads.models import ModelBuild


@pytest.fixture(scope="session")
def rocm_devices(pytestconfig: pytest.Config) -> list[DeviceInfo]:
    """Every device of this machine: the GPUs torch sees, then the CPU."""
    return run_state(pytestconfig).devices()


@pytest.fixture(scope="session")
def rocm_device(pytestconfig: pytest.Config) -> DeviceInfo:
    """The device this run validates (--rocm-device), with its arch, versions and capabilities."""
    return run_state(pytestconfig).device()


@pytest.fixture(scope="session")
def torch_device(rocm_device: DeviceInfo) -> Any:
    """The selected device as a torch.device, made current for the session."""
    import torch

    device = torch.device(rocm_device.torch_device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


@pytest.fixture(scope="session")
def model_builder(torch_device: Any) -> Callable[..., ModelBuild]:
    """build(name, scale='tiny', dtype=None, attn_implementation='sdpa', num_layers=None, seq_len=None, seed=0)
    on the selected device. Names: bert-large, bert-base, llama-3.1-8b."""
    from rocm_validate.workloads.models import build_model

    def build(name: str, scale: str = "tiny", **options: Any) -> ModelBuild:
        return build_model(name, scale, device=torch_device, **options)

    return build


class MetricRecorder:
    """Records a test's metrics on its item; each lands in the table, the report and JUnit.

    It records only: no baseline is read or written and no value fails the test (except a NaN
    or infinity). A metric that must be gated against this device's baseline is recorded with
    the `perf` fixture instead (docs/extending.md).
    """

    def __init__(self, item: pytest.Item) -> None:
        self._item = item

    def __call__(
        self,
        name: str,
        value: float,
        unit: str,
        better: str = "higher",
        **details: Any,
    ) -> Metric:
        """Record `name` = `value` `unit`; `better` is 'higher' or 'lower'.

        details: work, work_unit, peak, dispersion, samples, extra (see rocm_validate.results.metrics.Metric).
        A NaN or infinite value is recorded as such and fails the test.
        """
        __tracebackhide__ = True
        metric = self.build(name, value, unit, better, **details)
        if not math.isfinite(metric.value):
            metric = metric.with_verdict(Verdict.INVALID, f"measured {metric.value}: the measurement itself failed")
        self.add(metric)
        if metric.verdict == Verdict.INVALID:
            pytest.fail(f"metric {name} is {value}: the measurement produced no finite number", pytrace=False)
        return metric

    def build(self, name: str, value: float, unit: str, better: str = "higher", **details: Any) -> Metric:
        """A Metric of this test (its node id, and its suite unless `suite` is given), not yet attached."""
        from rocm_validate.results.metrics import Metric

        details.setdefault("suite", self._item.stash.get(SUITE_KEY, None))
        return Metric(name=name, value=float(value), unit=unit, better=better, nodeid=self._item.nodeid, **details)

    def add(self, metric: Metric) -> None:
        """Attach an already built (possibly gated) metric to the test."""
        self._item.stash.setdefault(PENDING_METRICS_KEY, []).append(metric)
        self._item.user_properties.append(metric.to_property())


@pytest.fixture
def record_rocm_metric(request: pytest.FixtureRequest) -> MetricRecorder:
    """record_rocm_metric(name, value, unit, better='higher', **details) -> Metric.

    Records a value into the metrics table, the JSON report and JUnit without gating it; use the
    `perf` fixture for a metric gated against a stored baseline.
    """
    return MetricRecorder(request.node)
