"""The plugin's own tests.

torch is imported here, once, before any pytester run: an in-process pytester run restores
sys.modules afterwards, and a torch first imported inside such a run would be unloaded and
imported again by the next one, which native extensions do not survive.
"""

import os

import pytest
import torch

from rocm_validate.platform.devices import DeviceInfo, discover_cpu

# The plugin's own tests drive pytest runs in temporary folders. Loaded here rather than in the
# root conftest, so users' `pytest --help` shows no pytester options (--lsof, --runpytest).
pytest_plugins = ("pytester",)


@pytest.fixture(scope="module")
def cpu() -> DeviceInfo:
    """This machine's CPU as the plugin discovers it, for checks run directly on the CPU."""
    return discover_cpu(torch, os.environ)
