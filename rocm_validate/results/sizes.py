"""Message sizes as the collectives write them ('4KiB', '256MiB', '1000B') and read them back:
one format for the collectives' options, their metric names and the perf gate's size rules. Pure."""

from __future__ import annotations

import re

_UNITS = {"b": 1, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "k": 1024, "m": 1024**2, "g": 1024**3}


def size_label(nbytes: int) -> str:
    """4096 -> '4KiB', 268435456 -> '256MiB', 1000 -> '1000B'."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{unit}"
    return f"{nbytes}B"


def parse_size(text: str) -> int:
    """'4KiB', '256M', '1GiB', '4096' -> bytes; ValueError naming the accepted forms."""
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in ("", *_UNITS):
        raise ValueError(f"{text!r} is not a size; expected bytes or a number with KiB, MiB or GiB, e.g. 64MiB")
    return int(match.group(1)) * _UNITS.get(unit, 1)
