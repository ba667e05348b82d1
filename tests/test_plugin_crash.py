"""A test that kills its process (a native library crash) must not take the run down with it."""

import json


def test_under_xdist_a_crashing_test_fails_alone_and_the_report_is_still_written(pytester):
    pytester.makepyfile(
        "import os\n\n"
        "def test_crash():\n"
        "    os.abort()\n\n"
        "def test_after(record_rocm_metric):\n"
        "    record_rocm_metric('copy', 1.0, 'GB/s')\n"
    )
    result = pytester.runpytest_subprocess("-n", "1", "--rocm-report=report.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*crashed while running*test_crash*"])
    report = json.loads((pytester.path / "report.json").read_text())
    assert [m["name"] for m in report["metrics"]] == ["copy"]
    assert report["exit_status"] == 1
