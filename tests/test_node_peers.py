"""Peer comparison with fake per-GPU metrics: a slow GPU among healthy peers is named, with its
BDF and how far below the median it is; healthy nodes, noise, other SKUs and informational
metrics are not flagged."""

from __future__ import annotations

import pytest

from rocm_validate.results.metrics import GpuRef, Metric
from rocm_validate.results.peers import PeerSample, compare, gpu_findings

GEMM = "gemm.bf16.8192x8192x8192"


def fixed_band(allowed: float = 0.05):
    """The gate's band as a function of the spreads: max(min_band, 3 x combined noise), capped at 8%."""

    def band(own: float | None, peer: float | None):
        noise = ((own or 0) ** 2 + (peer or 0) ** 2) ** 0.5 / 1.349
        value = min(0.08, max(allowed, 3 * noise))
        return value, f"{value:.1%}"

    return band


def _metrics(
    values: list[float],
    name: str = GEMM,
    better: str = "higher",
    dispersion: float = 0.01,
    key: str = "amd-instinct-mi300x-gfx942",
) -> list[Metric]:
    return [
        Metric(name, v, "TFLOP/s", better, dispersion=dispersion, gpu=GpuRef(i, f"0000:{i + 1:02x}:00.0", None, key))
        for i, v in enumerate(values)
    ]


def test_a_slow_gpu_is_named_with_its_bdf_and_its_distance_from_the_median_of_its_peers():
    findings = gpu_findings(_metrics([680, 684, 679, 682, 681, 600, 683, 680]), lambda m: fixed_band())
    flagged = [f for f in findings if f.flagged]
    assert [f.gpu.index for f in flagged] == [5]
    assert flagged[0].message.startswith(
        f"GPU 5 (BDF 0000:06:00.0) is 11.9% below the median of its 7 peers on {GEMM}: 600 vs 681 TFLOP/s (allowed 5.0%)"
    )
    assert len(findings) == 8 and {f.verdict for f in findings if not f.flagged} == {"pass"}


def test_a_healthy_node_flags_no_gpu():
    assert not any(
        f.flagged for f in gpu_findings(_metrics([680, 684, 679, 682, 681, 676, 683, 680]), lambda m: fixed_band())
    )


def test_with_two_gpus_only_the_worse_one_is_flagged():
    findings = gpu_findings(_metrics([700, 600]), lambda m: fixed_band())
    assert [(f.gpu.index, f.flagged) for f in findings] == [(0, False), (1, True)]
    assert "the median of its peer on" in findings[1].message


def test_noisy_measurements_widen_the_band_up_to_the_cap():
    quiet = gpu_findings(_metrics([100, 100, 93.5]), lambda m: fixed_band())
    noisy = gpu_findings(_metrics([100, 100, 93.5], dispersion=0.05), lambda m: fixed_band())
    assert [f.flagged for f in quiet] == [False, False, True]
    assert not any(f.flagged for f in noisy)
    capped = gpu_findings(_metrics([100, 100, 91], dispersion=0.5), lambda m: fixed_band())
    assert [f.flagged for f in capped] == [False, False, True]


def test_for_a_latency_a_gpu_above_its_peers_is_the_worse_one():
    findings = gpu_findings(
        _metrics([5.0, 5.1, 6.5], name="launch.empty_kernel", better="lower"), lambda m: fixed_band()
    )
    assert [f.flagged for f in findings] == [False, False, True]
    assert "28.7% above the median of its 2 peers on launch.empty_kernel (lower is better)" in findings[2].message


def test_gpus_of_different_skus_are_not_peers():
    mixed = _metrics([700], key="amd-instinct-mi300x-gfx942") + [
        Metric(
            GEMM, 400.0, "TFLOP/s", dispersion=0.01, gpu=GpuRef(1, None, None, "amd-instinct-mi300x-gfx942-cpx-nps4")
        )
    ]
    assert gpu_findings(mixed, lambda m: fixed_band()) == []


def test_invalid_measurements_and_metrics_without_a_gpu_are_left_out():
    metrics = _metrics([680, 600, 690])
    metrics[1] = metrics[1].with_verdict("invalid")
    single = Metric(GEMM, 1.0, "TFLOP/s")
    assert [f.gpu.index for f in gpu_findings([*metrics, single], lambda m: fixed_band())] == [0, 2]


def test_an_informational_metric_has_no_band_and_is_not_compared():
    assert gpu_findings(_metrics([680, 300, 690]), lambda m: lambda own, peer: None) == []


@pytest.mark.parametrize("value", [float("nan"), 0.0, -1.0])
def test_a_measurement_that_is_not_a_positive_number_is_not_a_peer(value):
    samples = [PeerSample("a", 10.0), PeerSample("b", 10.0), PeerSample("c", value)]
    assert [f.subject for f in compare("x", "GB/s", "higher", samples, fixed_band())] == ["a", "b"]


def test_the_band_each_subject_gets_comes_from_its_own_and_its_peers_spread():
    seen = []

    def band(own, peer):
        seen.append((own, peer))
        return 0.05, "5%"

    compare(
        "x",
        "GB/s",
        "higher",
        [PeerSample("a", 10.0, 0.01), PeerSample("b", 10.0, 0.03), PeerSample("c", 9.0, 0.02)],
        band,
    )
    assert seen == [(0.01, 0.025), (0.03, 0.015), (0.02, 0.02)]


def test_the_slow_peer_to_peer_pair_is_named_among_its_peer_pairs():
    pairs = {(a, b): 48.0 for a in range(4) for b in range(a + 1, 4)}
    pairs[(1, 3)] = 30.0
    samples = [PeerSample(f"GPU {a} -> GPU {b}", value, 0.01) for (a, b), value in pairs.items()]
    slow = [f for f in compare("p2p copy bandwidth", "GB/s", "higher", samples, fixed_band()) if f.flagged]
    assert [f.message for f in slow] == [
        "GPU 1 -> GPU 3 is 37.5% below the median of its 5 peers on p2p copy bandwidth: 30 vs 48 GB/s (allowed 5.0%)"
    ]
