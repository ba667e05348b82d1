"""Every command line a run prints, from one builder: the header's command that repeats the run,
and the hints that record baselines or RCPs (`--update-baselines`) and accept a regression
(`--rocm-accept-regressions`). Built from the run's settings and, once known, its device, so each
one carries the user's device, baselines folder (absolute, so it works from any directory) and
level; a suite adds only its own words (a path, `-k TEST`, an option of its own).

The one rule for a regression found while recording is here too (`Commands.refusal`): nothing
is written unless --rocm-accept-regressions says the stack really changed, and the refusal names
the command that records it anyway. The perf gate and the mini-BERT RCPs both use it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from rocm_validate.core.levels import DEFAULT_LEVEL
from rocm_validate.core.options import (
    ACCEPT_FLAG,
    BASELINES,
    DEVICE,
    LEVEL,
    STRICT_FLAG,
    SUITE,
    UPDATE_FLAG,
    Settings,
)
from rocm_validate.core.suites import BASELINE_SUITES
from rocm_validate.platform.device_info import DeviceInfo


@dataclass(frozen=True)
class Commands:
    """The commands of one run: `settings` as resolved, `device` the one validated (None before
    discovery: the device is then named only if the user chose one), `selection` the test paths
    and -k / -m expressions the user gave (repeated by `repeat`)."""

    settings: Settings
    device: DeviceInfo | None = None
    selection: tuple[str, ...] = ()

    def device_argument(self) -> str | None:
        """The --rocm-device value of this run: the user's choice, else the device it resolved to."""
        if self.settings.device.kind != "auto":
            return self.settings.device.argument
        if self.device is None:
            return None
        return str(self.device.index) if self.device.is_gpu else "cpu"

    def _choices(self) -> list[str]:
        """The run's own choices every command repeats: device, baselines folder, level."""
        device = self.device_argument()
        words = [f"{DEVICE.flag}={device}"] if device is not None else []
        words.append(f"{BASELINES.flag}={self.settings.baselines_dir}")
        if self.settings.level != DEFAULT_LEVEL:
            words.append(f"{LEVEL.flag}={self.settings.level}")
        return words

    def repeat(self) -> str:
        """The command that repeats this run's choices (the header's `rerun:` line)."""
        words = ["pytest", f"{SUITE.flag}={','.join(sorted(self.settings.suites))}", *self._choices()]
        return shlex.join(words + ([STRICT_FLAG] if self.settings.strict else []) + list(self.selection))

    def record(self, suites: Sequence[str] = (), *words: str) -> str:
        """The command that records baselines of `suites` (default: the baseline suites this run
        selected, else perf), with a suite's own `words` before --update-baselines."""
        chosen = sorted(suites or (set(BASELINE_SUITES) & self.settings.suites) or {"perf"})
        return shlex.join(["pytest", f"{SUITE.flag}={','.join(chosen)}", *self._choices(), *words, UPDATE_FLAG])

    def accept(self, suites: Sequence[str] = (), *words: str) -> str:
        """`record`, recording regressions too (--rocm-accept-regressions)."""
        return f"{self.record(suites, *words)} {ACCEPT_FLAG}"

    def refusal(self, finding: str, suites: Sequence[str] = (), *words: str) -> str | None:
        """Why --update-baselines must not record a regression (`finding`: what got worse, and
        by how much), naming the command that records it anyway; None when the run was started
        with --rocm-accept-regressions and may record it."""
        if self.settings.accept_regressions:
            return None
        return (
            f"refused: {finding}; not written. If the stack really changed, record it with "
            f"{self.accept(suites, *words)}"
        )
