"""The pytest header: what this run validates, on which device and stack, and the command that
repeats it (as pytest-randomly prints the seed to rerun with)."""

from __future__ import annotations

from rocm_validate import __version__
from rocm_validate.core.commands import Commands
from rocm_validate.core.options import Settings
from rocm_validate.core.plan import RunPlan
from rocm_validate.results.report import device_summary, stack_summary


def header_lines(settings: Settings, plan: RunPlan | None, selection: tuple[str, ...] = ()) -> list[str]:
    """pytest header: suites, baselines and (when the plan is resolved) the device, its software
    stack and the level's budget, and the command that repeats the run with the user's
    `selection` (test paths, -k, -m)."""
    mode = "update baselines" if settings.update_baselines else ("strict" if settings.strict else "gate")
    lines = [
        f"rocm-validate {__version__}: suites {','.join(sorted(settings.suites))}; "
        f"baselines {settings.baselines_dir}; mode {mode}"
    ]
    if plan is not None:
        device = plan.device
        lines.append(f"rocm-validate device: {device_summary(device)}; {stack_summary(device)}")
        for variable, value in device.visibility:
            lines.append(f"rocm-validate visibility: {variable}={value}")
        if device.errors:
            lines.append(f"rocm-validate probes that failed: {'; '.join(device.errors)}")
        lines.append(f"rocm-validate level {plan.budget.header}")
        lines.append(f"rocm-validate rerun: {Commands(settings, device, selection).repeat()}")
    return lines
