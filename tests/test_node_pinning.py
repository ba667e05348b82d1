"""Pinning one worker (or one collectives world) to chosen GPUs, for every combination of the
visibility variables a node can have set, and the worker's own view of its GPU."""

from __future__ import annotations

import dataclasses
import json

import fake_devices
import pytest

from rocm_validate.core.plan import NodePlan
from rocm_validate.errors import DeviceError
from rocm_validate.node.facts import from_workerinput, node_plan, pinned_device, to_workerinput, worker_spec
from rocm_validate.node.pinning import index_space, pin
from rocm_validate.node.workers import worker_count_problem

# (backend, environment, GPUs asked for, expected variable=value in the pinned process)
COMBINATIONS = [
    ("rocm", {}, (3,), "HIP_VISIBLE_DEVICES=3"),
    ("rocm", {"HIP_VISIBLE_DEVICES": "0,2,4,6"}, (3,), "HIP_VISIBLE_DEVICES=6"),
    ("rocm", {"HIP_VISIBLE_DEVICES": " 1, 5 "}, (1,), "HIP_VISIBLE_DEVICES=5"),
    ("rocm", {"CUDA_VISIBLE_DEVICES": "1,3"}, (1,), "HIP_VISIBLE_DEVICES=3"),
    ("rocm", {"HIP_VISIBLE_DEVICES": "", "CUDA_VISIBLE_DEVICES": "1,3"}, (0,), "HIP_VISIBLE_DEVICES=1"),
    ("rocm", {"HIP_VISIBLE_DEVICES": "4,5", "CUDA_VISIBLE_DEVICES": "0,1"}, (1,), "HIP_VISIBLE_DEVICES=5"),
    ("rocm", {"ROCR_VISIBLE_DEVICES": "2,3,6"}, (1,), "HIP_VISIBLE_DEVICES=1"),
    ("rocm", {"ROCR_VISIBLE_DEVICES": "2,3,6", "HIP_VISIBLE_DEVICES": "2,0"}, (0,), "HIP_VISIBLE_DEVICES=2"),
    ("rocm", {"GPU_DEVICE_ORDINAL": "5"}, (2,), "HIP_VISIBLE_DEVICES=2"),
    ("rocm", {"HIP_VISIBLE_DEVICES": "GPU-a1,GPU-b2"}, (1,), "HIP_VISIBLE_DEVICES=GPU-b2"),
    ("rocm", {"HIP_VISIBLE_DEVICES": "7,6,5,4"}, (0, 2, 3), "HIP_VISIBLE_DEVICES=7,5,4"),
    ("cuda", {}, (5,), "CUDA_VISIBLE_DEVICES=5"),
    ("cuda", {"CUDA_VISIBLE_DEVICES": "2,3"}, (1,), "CUDA_VISIBLE_DEVICES=3"),
    ("cuda", {"CUDA_VISIBLE_DEVICES": "GPU-aaa,MIG-bbb"}, (1,), "CUDA_VISIBLE_DEVICES=MIG-bbb"),
    ("cuda", {"HIP_VISIBLE_DEVICES": "4,5"}, (1,), "CUDA_VISIBLE_DEVICES=1"),
    ("cuda", {"ROCR_VISIBLE_DEVICES": "4,5"}, (0,), "CUDA_VISIBLE_DEVICES=0"),
]


@pytest.mark.parametrize("backend, env, gpus, expected", COMBINATIONS)
def test_the_pinned_process_sees_the_chosen_gpu_through_the_list_in_force(backend, env, gpus, expected):
    assert [f"{k}={v}" for k, v in pin(backend, gpus, env).env().items()] == [expected]


def test_rocr_visible_devices_is_inherited_and_named_because_hip_indexes_into_what_it_leaves():
    pinning = pin("rocm", (1,), {"ROCR_VISIBLE_DEVICES": "2,3,6", "HIP_VISIBLE_DEVICES": "0,2"})
    assert "ROCR_VISIBLE_DEVICES" not in pinning.env()
    assert pinning.describe() == (
        "HIP_VISIBLE_DEVICES=2 (entries of HIP_VISIBLE_DEVICES=0,2; inside ROCR_VISIBLE_DEVICES=2,3,6)"
    )


def test_an_empty_cuda_visible_devices_means_no_gpu_on_cuda_but_hip_ignores_an_empty_hip_variable():
    assert index_space("cuda", {"CUDA_VISIBLE_DEVICES": ""}) == ("CUDA_VISIBLE_DEVICES", [])
    assert index_space("rocm", {"HIP_VISIBLE_DEVICES": ""}) == (None, None)


def test_a_gpu_beyond_the_list_in_force_is_a_device_error_naming_it():
    with pytest.raises(DeviceError, match=r"GPU 4 is not in HIP_VISIBLE_DEVICES=0,2 \(2 entries\); choose among 0..1"):
        pin("rocm", (1, 4), {"HIP_VISIBLE_DEVICES": "0,2"})


def test_the_cpu_needs_no_variable():
    pinning = pin("cpu", (), {"HIP_VISIBLE_DEVICES": "1"})
    assert pinning.env() == {} and pinning.describe() == "no visibility variable (the CPU)"


def _node(*indices: int, env: dict[str, str] | None = None, gpu: int | None = None) -> NodePlan:
    gpus = tuple(dataclasses.replace(fake_devices.mi300x(), index=i, pci_bus_id=f"0000:{i:02x}:00.0") for i in indices)
    return dataclasses.replace(node_plan(gpus, tuple(sorted((env or {}).items())), workers=True, beside=False), gpu=gpu)


def test_each_worker_spec_sets_its_gpu_before_the_worker_starts():
    plan = _node(0, 1, env={"HIP_VISIBLE_DEVICES": "4,6"})
    assert [worker_spec(plan, d) for d in plan.devices] == [
        "popen//env:HIP_VISIBLE_DEVICES=4//env:ROCM_VALIDATE_NODE_GPU=0",
        "popen//env:HIP_VISIBLE_DEVICES=6//env:ROCM_VALIDATE_NODE_GPU=1",
    ]
    assert worker_spec(NodePlan(tuple([fake_devices.cpu()])), fake_devices.cpu()) == "popen"


def test_the_whole_node_plan_travels_to_a_worker_as_plain_data():
    plan = _node(0, 1, env={"ROCR_VISIBLE_DEVICES": "0,1"})
    back = from_workerinput(json.loads(json.dumps(to_workerinput(plan, 1))), "beside")
    assert back == dataclasses.replace(plan, gpu=1, lane="beside")
    assert back.pinnings == (
        "HIP_VISIBLE_DEVICES=0 (inside ROCR_VISIBLE_DEVICES=0,1)",
        "HIP_VISIBLE_DEVICES=1 (inside ROCR_VISIBLE_DEVICES=0,1)",
    )
    assert back.gpu_ref(1).label == "GPU 1 (BDF 0000:01:00.0)" and back.gpu_ref(7) is None


def test_a_pinned_worker_validates_the_only_gpu_it_sees():
    only = dataclasses.replace(fake_devices.mi300x(), index=0, pci_bus_id="0000:05:00.0")
    assert pinned_device([only, fake_devices.cpu()], _node(0, 5, gpu=5)) is only


def test_a_worker_that_sees_several_gpus_was_not_pinned_and_stops_the_run():
    plan = _node(0, 1, gpu=1)
    with pytest.raises(
        DeviceError, match=r"the worker pinned to GPU 1 \(HIP_VISIBLE_DEVICES=1\) sees 2 GPUs instead of 1"
    ):
        pinned_device([*plan.devices, fake_devices.cpu()], plan)


@pytest.mark.parametrize("requested, problem", [(None, False), (4, False), (3, True), (8, True)])
def test_a_worker_count_the_user_gave_must_match_the_devices(requested, problem):
    found = worker_count_problem(requested, 4, "all")
    assert (found is not None) == problem
    if problem:
        assert f"-n {requested} was given" in found and "it is set to 4" in found
