"""Bus bandwidth as nccl-tests reports it, and the check that it does not drop as messages grow.

nccl-tests (and rccl-tests) report, per collective over n ranks, the algorithm bandwidth
algbw = S / t, where S is the size column (the largest buffer on a rank: the reduced buffer of
all_reduce and broadcast, the gathered output of all_gather, the scattered input of
reduce_scatter, the exchanged buffer of all_to_all), and the bus bandwidth busbw = algbw x a
factor that makes it comparable with the hardware's link speed whatever n is:
2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and all_to_all, 1 for broadcast
(nccl-tests doc/PERFORMANCE.md, src/*.cu `GetBw`), whatever the data type (`-d bfloat16`): the
training collectives (`formats.py`) use the same factors, S counted in their own bytes.

A bus bandwidth that falls as the message grows is a fault of its own (a protocol switch gone
wrong, a link dropping to a slower path): ROCm/cvs `check_bw_dip` fails a drop of more than 5%
from one size to the next. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rocm_validate.collectives.formats import TRAINING_COLLECTIVES, split
from rocm_validate.results.sizes import size_label

COLLECTIVES: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
EVERY_COLLECTIVE: tuple[str, ...] = COLLECTIVES + TRAINING_COLLECTIVES  # float32, then as training calls them
DIP_MIN_DROP = 0.05  # ROCm/cvs check_bw_dip: a drop of more than 5% from one size to the next


def bus_factor(name: str, world: int) -> float:
    """busbw / algbw for collective `name` over `world` ranks (nccl-tests; the same in every data
    type: 'all_reduce_bf16' is an all_reduce)."""
    op = split(name)[0]
    if world < 1:
        raise ValueError(f"a world has at least one rank, found {world}")
    if op == "all_reduce":
        return 2 * (world - 1) / world
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (world - 1) / world
    if op in ("broadcast", "p2p"):
        return 1.0
    raise ValueError(f"unknown collective {name!r}; known: {', '.join(EVERY_COLLECTIVE)}, p2p")


def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in GB/s (10^9 bytes, as nccl-tests)."""
    return nbytes / seconds / 1e9


def busbw_gbps(op: str, nbytes: int, seconds: float, world: int) -> float:
    return algbw_gbps(nbytes, seconds) * bus_factor(op, world)


@dataclass(frozen=True)
class BandwidthPoint:
    """One message size's bus bandwidth and the relative spread of its timed rounds."""

    nbytes: int
    busbw: float
    dispersion: float | None = None


@dataclass(frozen=True)
class Dip:
    """A size whose bus bandwidth fell below the previous size's by more than allowed."""

    smaller: BandwidthPoint
    larger: BandwidthPoint
    allowed: float
    how: str = ""

    @property
    def drop(self) -> float:
        return 1 - self.larger.busbw / self.smaller.busbw

    def message(self, op: str) -> str:
        return (
            f"{op}: bus bandwidth drops {self.drop:.1%} from {size_label(self.smaller.nbytes)} "
            f"({self.smaller.busbw:.4g} GB/s) to {size_label(self.larger.nbytes)} ({self.larger.busbw:.4g} GB/s), "
            f"more than the {self.allowed:.1%} allowed{f' ({self.how})' if self.how else ''}"
        )


def find_dips(
    points: Sequence[BandwidthPoint], allowed: Callable[[BandwidthPoint, BandwidthPoint], tuple[float, str]]
) -> list[Dip]:
    """Each size against the next smaller one (cvs: `current < last x 0.95`); `allowed(smaller,
    larger)` gives the largest drop that is not a dip and how it was derived."""
    ordered = sorted(points, key=lambda p: p.nbytes)
    dips = []
    for smaller, larger in zip(ordered, ordered[1:]):
        limit, how = allowed(smaller, larger)
        if smaller.busbw > 0 and larger.busbw < smaller.busbw * (1 - limit):
            dips.append(Dip(smaller, larger, limit, how))
    return dips
