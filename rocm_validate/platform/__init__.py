"""Facts about the machine and the decisions made from them, torch-free at import.

devices (discovery into DeviceInfo, never crashing), arch (gfx / sm names, versions, device
keys), capabilities (FP8 formats, `_scaled_mm`, SDPA backends, BLAS library: one rule each),
amd_tools (amd-smi / rocm-smi / rocminfo / amdsmi parsers), peaks (datasheet peaks),
telemetry (clocks, temperature and power around a measurement). Every rule is a pure function
of discovered facts, unit-tested with the facts of devices this project cannot run on.
"""
