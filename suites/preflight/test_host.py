"""Preflight: the host's settings, links, error counters and kernel messages, read-only and in
seconds, before any GPU work (first when --rocm-suite=all). Each check states the expected value
and its source; a check that cannot read its source skips saying why (a container without /sys,
a restricted /dev/kmsg, macOS). The logic lives in rocm_validate.preflight."""

from __future__ import annotations

import pytest

from rocm_validate.preflight import checks, ras
from rocm_validate.preflight import host as readers

# Read-only host checks that take seconds: every level runs them, as DCGM's level 1 does.
pytestmark = pytest.mark.rocm_level("quick")


def _needs_gpus(host) -> None:
    if not host.gpus:
        pytest.skip(f"needs a GPU on the PCI bus, found {host.problem or 'no AMD or NVIDIA GPU there'}")


def test_numa_auto_balancing_is_off(host, preflight) -> None:
    preflight(checks.numa_balancing(readers.read(host.root, "proc/sys/kernel/numa_balancing"), host.vendors))


def test_iommu_is_in_passthrough_where_amd_asks_for_it(host, preflight) -> None:
    preflight(checks.iommu(readers.read(host.root, "proc/cmdline"), host.vendors, readers.cpu_vendor(host.root)))


def test_every_gpu_link_runs_at_its_maximum_speed_and_width(host, preflight) -> None:
    _needs_gpus(host)
    preflight([checks.pcie_link(gpu, readers.read_link(gpu)) for gpu in host.gpus])


def test_no_gpu_has_uncorrectable_memory_errors(host, preflight, ras_at_start) -> None:
    _needs_gpus(host)
    counts, problems = ras.read_counts(list(host.gpus))
    ras_at_start.counts, ras_at_start.taken = counts, True
    preflight(checks.ras_counts(counts, problems))


def test_the_kernel_reports_no_gpu_errors(host, preflight) -> None:
    preflight(checks.kernel_messages(readers.read_kernel_messages(host.root)))


def test_driver_and_firmware_versions_are_known_and_the_same_on_every_gpu(host, preflight) -> None:
    _needs_gpus(host)
    drivers = {vendor: readers.driver_version(host.root, vendor) for vendor in host.vendors}
    firmware = {gpu.address: readers.read_firmware(gpu) for gpu in host.gpus if gpu.vendor == "amd"}
    preflight(checks.driver_and_firmware(drivers, firmware))


def test_large_pages_are_available(host, preflight) -> None:
    transparent = readers.read(host.root, "sys/kernel/mm/transparent_hugepage/enabled")
    preflight(checks.large_pages(transparent, readers.read(host.root, "proc/meminfo")))


def test_locked_memory_is_unlimited(host, preflight) -> None:
    preflight(checks.memlock(readers.memlock_limit(host.root)))


@pytest.mark.rocm_run_last
def test_no_gpu_error_counter_rose_during_the_run(host, preflight, ras_at_start) -> None:
    """Runs after every other test of the session: the counters read at the start, read again."""
    _needs_gpus(host)
    if not ras_at_start.taken:
        pytest.skip(
            "needs the error counters read at the start of the run in this process, found none "
            "(the start check was deselected, skipped, or ran in another xdist worker: run preflight with -n 0)"
        )
    counts, problems = ras.read_counts(list(host.gpus))
    preflight(checks.ras_rise(ras_at_start.counts, counts), [checks.skipped("ras_unchanged", p) for p in problems])
