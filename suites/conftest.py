"""The suites run under the rocm_validate plugin: without it (`-p no:rocm_validate`) every suite
file would fail to collect with a traceback of its own, so the run stops here, once, instead."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("rocm_validate"):
        raise pytest.UsageError(
            "the suites need the rocm_validate plugin, which '-p no:rocm_validate' turned off; remove that "
            "option to run them, or run other tests without the suites"
        )
