"""A node of fake GPUs whose discovery honours HIP_VISIBLE_DEVICES as the HIP runtime does (the
listed GPUs, renumbered from 0), so a whole-node run's pinned workers each see only their own GPU,
as on a real node. Only the devices are fake: workers, pinning and reports are the real ones."""

from __future__ import annotations

import dataclasses
import json

import fake_devices


def gpus(count: int) -> list:
    """`count` MI300X GPUs with distinct indices, PCI addresses and UUIDs."""
    return [
        dataclasses.replace(fake_devices.mi300x(), index=i, pci_bus_id=f"0000:{i + 1:02x}:00.0", uuid=f"GPU-{i:04d}")
        for i in range(count)
    ]


def node_conftest(count: int) -> str:
    """Source of a conftest.py whose discovery shows `count` fake GPUs through HIP_VISIBLE_DEVICES."""
    data = json.dumps([d.to_dict() for d in gpus(count)])
    cpu = json.dumps(fake_devices.cpu().to_dict())
    return (
        "import dataclasses, json, os\n"
        "from rocm_validate.platform.devices import DeviceInfo\n\n"
        "def pytest_rocm_discover_devices(config):\n"
        f"    gpus = [DeviceInfo.from_dict(d) for d in json.loads({data!r})]\n"
        "    visible = os.environ.get('HIP_VISIBLE_DEVICES')\n"
        "    if visible:\n"
        "        gpus = [dataclasses.replace(gpus[int(e)], index=i) for i, e in enumerate(visible.split(','))]\n"
        f"    return [*gpus, DeviceInfo.from_dict(json.loads({cpu!r}))]\n"
    )


def write_node(pytester, count: int, **tests: str) -> None:
    """A rootdir with a node of `count` fake GPUs and test files at suites/<suite>/test_<name>.py,
    one per keyword `<suite>__<name>`."""
    pytester.makeconftest(node_conftest(count))
    for name, source in tests.items():
        suite, _, module = name.partition("__")
        folder = pytester.path / "suites" / suite
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"test_{module}.py").write_text(source)
