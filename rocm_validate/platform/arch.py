"""Architecture names and keys: gfx / sm parsing, version parsing, caches and the device key.

Pure functions of strings and numbers, unit-tested with the facts of devices we cannot run on
(MI300X, MI355X, MI250, ...). What a device can run (FP8, `_scaled_mm`, attention, BLAS) is
decided from these facts in `rocm_validate.platform.capabilities`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# AMD Infinity Cache (MALL) sits behind L2 and in front of HBM; a cache flush must exceed it.
_INFINITY_CACHE_MIB: dict[str, int] = {"gfx942": 256, "gfx950": 256}

_GFX_RE = re.compile(r"^gfx([0-9a-f]+)$")
_VERSION_RE = re.compile(r"(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class GcnArch:
    """`gfx942:sramecc+:xnack-` split into the ISA name and its feature switches."""

    name: str
    features: tuple[tuple[str, bool], ...]


def normalize_gfx(name: str) -> str:
    """Canonical gfx name, undoing the decimal rendering of ROCm < 6.4 tools.

    rocm-smi before 6.4 printed `"gfx" + major + minor + stepping` with the stepping in
    decimal, so gfx90a (9, 0, 0xa) came out as `gfx9010` and gfx90c as `gfx9012`.
    A major-9 name has three characters after "gfx" and a major-10+ name four; one with
    two more digits is the decimal form.
    """
    text = name.strip().lower()
    match = _GFX_RE.match(text)
    if not match:
        return text
    digits = match.group(1)
    if not digits.isdigit():
        return text
    major_len = 1 if digits.startswith("9") else 2
    if len(digits) == major_len + 3:
        major, minor, stepping = digits[:major_len], digits[major_len], int(digits[major_len + 1 :])
        if stepping < 16:
            return f"gfx{major}{minor}{stepping:x}"
    return text


def parse_gcn_arch(gcn_arch_name: str) -> GcnArch:
    """`gfx942:sramecc+:xnack-` -> GcnArch('gfx942', (('sramecc', True), ('xnack', False)))."""
    head, *switches = gcn_arch_name.strip().split(":")
    features = []
    for switch in switches:
        switch = switch.strip()
        if len(switch) > 1 and switch[-1] in "+-":
            features.append((switch[:-1].lower(), switch[-1] == "+"))
    return GcnArch(normalize_gfx(head), tuple(features))


def sm_arch(major: int, minor: int) -> str:
    """CUDA compute capability (9, 0) -> 'sm_90'."""
    return f"sm_{major}{minor}"


def sm_number(arch: str) -> int | None:
    """'sm_90' -> 90, anything else -> None."""
    if arch.startswith("sm_") and arch[3:].isdigit():
        return int(arch[3:])
    return None


def parse_version(text: str | None) -> tuple[int, int] | None:
    """'6.3.42131-fa1d09cbd' -> (6, 3); None or garbage -> None."""
    if not text:
        return None
    match = _VERSION_RE.search(text)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


def infinity_cache_bytes(backend: str, arch: str) -> int | None:
    """AMD Infinity Cache (MALL) size by architecture; None where there is none."""
    if backend != "rocm":
        return None
    mib = _INFINITY_CACHE_MIB.get(arch)
    return None if mib is None else mib * 1024 * 1024


def slug(text: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (file-name safe)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def device_key(
    backend: str,
    name: str,
    arch: str,
    compute_partition: str | None = None,
    memory_partition: str | None = None,
) -> str:
    """Stable, file-name safe key naming a kind of device, used for baseline file names.

    'amd-instinct-mi300x-gfx942', 'nvidia-h100-80gb-hbm3-sm90', 'cpu-<model>'. A partitioned
    MI300 (CPX, NPS4, ...) is a different device for performance, so its modes join the key.
    """
    if backend == "cpu":
        model = re.sub(r"\((r|tm)\)|\b(processor|cpu)\b", " ", name.lower())
        return "cpu-" + (slug(model) or "unknown")
    parts = [slug(name) or "unknown-gpu"]
    arch_slug = slug(arch).replace("-", "")
    if arch_slug and not parts[0].endswith(arch_slug):
        parts.append(arch_slug)
    for mode, default in ((compute_partition, "spx"), (memory_partition, "nps1")):
        if mode and slug(mode) not in (default, "n-a", ""):
            parts.append(slug(mode))
    return "-".join(parts)
