"""Facts about the machine and the decisions made from them, torch-free at import.

devices (discovery into DeviceInfo, never crashing), device_info (the `DeviceInfo` record),
selection (`--rocm-device` parsed once, and the devices it picks), arch (gfx / sm names, PCI
device ids, versions, device keys), identity (the product from its PCI device ID), capabilities
(FP8 formats, `_scaled_mm`, SDPA kernels, BLAS and attention libraries: one rule each), probes
(what the device itself answers, once per run), partitions (MI300 modes from sysfs or
inferred), amd_tools (amd-smi / rocm-smi / rocminfo / amdsmi parsers), amd_smi_views (amd-smi's summary,
partition and metric views), topology (links between GPUs, P2P pairs), tool_failures (why a tool found no
GPU, in its own words), nvidia_tools
(nvidia-smi -q -x), amdsmi_import (the amdsmi copy that matches ROCm), offline (a node from its
saved tool outputs), probing (how a failed probe is worded), libraries (optional libraries:
missing or broken), peaks (datasheet peaks), telemetry (clocks, temperature and power around a
measurement), clocks (the clock over a measurement window), processes (other processes on the
GPU, host CPU load). Every rule is a pure function of discovered facts, unit-tested with the facts
of devices this project cannot run on.
"""
