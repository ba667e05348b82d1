"""A correctness check's margins: how close one comparison came to each of its bounds.

The correctness suite records one `CheckMargins` per comparison a test judged, as the JSON list of
the test's `rocm_numerics` property (NUMERICS_PROPERTY); the report keeps that list per test. Its
keys are the report's format: `to_dict` writes them and `from_dict` reads them, nothing else does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from rocm_validate.results.metrics import NUMERICS_PROPERTY


@dataclass(frozen=True)
class CheckMargins:
    """One comparison's verdict and, for each bound its tolerance row sets, how far it got (None
    where the row sets no such bound)."""

    check: str
    passed: bool
    ratio: float | None = None  # the worst element's error over the same-precision reference's
    k: float | None = None  # the ratio the row allows
    norm_ratio: float | None = None  # the error norm over the reference's
    k_norm: float | None = None
    sqnr_db: float | None = None
    reference_sqnr_db: float | None = None
    min_sqnr_db: float | None = None
    precision: str | None = None  # the precision the error model judged in
    model_ratio: float | None = None  # the worst element over the error model's bound
    model_norm_ratio: float | None = None
    lean: float | None = None  # the systematic error, relative to the golden's size
    lean_ulps: float | None = None
    allowed_lean: float | None = None
    accuracy_ratio: float | None = None  # the error norm over a correct implementation's
    accuracy_factor: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckMargins:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def margins_in(properties: list[tuple[str, Any]]) -> list[CheckMargins]:
    """Every check's margins among a test's user properties."""
    return [
        CheckMargins.from_dict(entry)
        for name, value in properties
        if name == NUMERICS_PROPERTY
        for entry in json.loads(value)
    ]
