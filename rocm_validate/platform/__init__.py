"""Facts about the machine and the decisions made from them, torch-free at import.

devices (discovery into DeviceInfo, never crashing), arch (gfx / sm names, PCI device ids,
versions, device keys), capabilities (FP8 formats, `_scaled_mm`, SDPA backends, BLAS and
attention libraries: one rule each), probes (what the device itself answers, once per run),
partitions (MI300 modes from sysfs or inferred), amd_tools (amd-smi / rocm-smi / rocminfo /
amdsmi parsers), nvidia_tools (nvidia-smi -q -x), amdsmi_import (the amdsmi copy that matches
ROCm), offline (a node from its saved tool outputs), probing (how a failed probe is worded),
peaks (datasheet peaks), telemetry (clocks, temperature and power around a measurement). Every
rule is a pure function of discovered facts, unit-tested with the facts of devices this project
cannot run on.
"""
