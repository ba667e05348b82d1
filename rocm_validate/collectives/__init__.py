"""The collectives suite: one torch.distributed process group over the selected devices (NCCL /
RCCL on GPUs, gloo on the CPU), each collective checked on every rank (bit for bit; a bf16 /
fp16 reduction within the error bound of any reduction order) and timed as bus bandwidth across
message sizes, and peer-to-peer copies between every pair of devices.

`busbw.py` (bandwidth conventions and the dip rule, pure), `plan.py` (what a run measures, pure),
`payloads.py` (integer-valued payloads whose results are known exactly), `formats.py` (the data
types training moves and the error bound of a bf16 / fp16 reduction, pure), `training_payloads.py`
(bf16 / fp16 gradients checked against the float64 sum within that bound, FP8 codes bit for bit), `rank.py` (the program
each rank runs: `python -m rocm_validate.collectives`, also under torchrun), `launch.py` (starts a
world on this host from pytest), `outcome.py` (every rank's results into one verdict, pure),
`plugin.py` (options and fixtures), `steps.py` (the node's training steps: what a run measures and
its verdicts, pure) and `training.py` (their per-rank program: `python -m
rocm_validate.collectives.training`).
"""
