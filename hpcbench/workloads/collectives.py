"""nccl-tests' collectives as nccl-tests defines them, and each one over torch.distributed and Horovod.

What a message size means, the bus bandwidth factor, and the redop and root columns are nccl-tests' own
(NVIDIA/nccl-tests at a0b82b2, NCCL_TESTS_VERSION 2.19.6):

- size and count (src/common.cu:900-912 setupArgs, :938 the printed row; each src/<name>.cu GetCollByteCount):
  count = size / sizeof(dtype) for all_reduce, broadcast, reduce and sendrecv, and the printed size is count x
  sizeof. all_gather, reduce_scatter and alltoall print the whole buffer: count is one rank's share,
  (size / sizeof / n) rounded down to a multiple of 16 bytes (src/all_gather.cu:11, src/reduce_scatter.cu:11,
  src/alltoall.cu:19), and size = n x count x sizeof. A size whose share rounds down to 0 is not run here
  (nccl-tests times a 0-byte call there).
- algbw = size / time; busbw = algbw x factor (doc/PERFORMANCE.md:134-143 "Summary"; the GetBw functions):
  all_reduce 2(n-1)/n (src/all_reduce.cu:59-64), all_gather (n-1)/n (src/all_gather.cu:38-43), reduce_scatter
  (n-1)/n (src/reduce_scatter.cu:37-42), broadcast 1 (src/broadcast.cu:34-39), reduce 1 (src/reduce.cu:36-39),
  alltoall (n-1)/n (src/alltoall.cu:48-53), sendrecv 1 (src/sendrecv.cu:38-43; rank r sends to r+1 and
  receives from r-1, src/sendrecv.cu:51-59).
- redop: "none" for all_gather, broadcast and alltoall, else "sum"; root: 0 for broadcast and reduce, else -1.

In-place is nccl-tests' in-place: the result lands in the buffer that held the input (all_gather: the input is
the rank's slice of the output; reduce_scatter: the output is the rank's slice of the input). Where the library
has no call for one of the two modes, it is written as a user would: a copy plus the library's other call
(torch.distributed has no out-of-place all_reduce, broadcast or reduce; Horovod has no in-place allgather,
reducescatter or alltoall; neither has an in-place alltoall or sendrecv, which go through a scratch copy).

Each rank's result is checked element by element after timing: reductions sum small integers (1-4), so every
partial sum is exact even in float16/bfloat16; data movement carries a tag of the sending rank and position
((i + 31 r) mod 251 + 1), so a block from the wrong rank or place is caught.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Spec:
    name: str
    redop: str  # the redop column nccl-tests prints
    root: int  # the root column: the root rank, or -1
    shared: bool  # size is the whole buffer, n x one rank's count (all_gather, reduce_scatter, alltoall)
    factor: Callable[[int], float]  # busbw = algbw x factor(n)
    reduces: bool  # its result is a sum over ranks (else it moves data)


SPECS: dict[str, Spec] = {s.name: s for s in (
    Spec("all_reduce", "sum", -1, False, lambda n: 2 * (n - 1) / n, True),
    Spec("all_gather", "none", -1, True, lambda n: (n - 1) / n, False),
    Spec("reduce_scatter", "sum", -1, True, lambda n: (n - 1) / n, True),
    Spec("broadcast", "none", 0, False, lambda n: 1.0, False),
    Spec("reduce", "sum", 0, False, lambda n: 1.0, True),
    Spec("alltoall", "none", -1, True, lambda n: (n - 1) / n, False),
    Spec("sendrecv", "sum", -1, False, lambda n: 1.0, False),
)}
# Horovod's names for the collectives it has (horovod.torch: allreduce, allgather, reducescatter, broadcast, alltoall).
HOROVOD_NAMES = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
                 "broadcast": "broadcast", "alltoall": "alltoall"}
# How a library says it lacks an operation or a type (Horovod: "Tensor type ... is not supported.",
# ProcessGroupMPI: "does not support reduce_scatter"): raised by every rank alike, before any traffic.
UNSUPPORTED_RE = re.compile(r"not supported|does not support|unsupported|not implemented", re.IGNORECASE)
CHUNK = 1 << 22  # elements checked at a time: the expected values of a 1 GiB buffer are never all in memory


def bus_factor(n: int, collective: str = "all_reduce") -> float:
    return SPECS[collective].factor(n)


def shape(collective: str, size: int, elsize: int, n: int) -> tuple[int, int]:
    """(count, size) as nccl-tests prints them for a requested ``size`` in bytes; count 0: nothing to run."""
    if SPECS[collective].shared:
        count = (size // elsize // n) & ~(max(16 // elsize, 1) - 1)
        return count, count * n * elsize
    count = max(1, size // elsize)  # hpcbench has always run at least one element
    return count, count * elsize


def static_reason(collective: str, framework: str, backend: str, world: int, hvd: Any = None,
                  version: str = "") -> str | None:
    """Why this library cannot run ``collective`` at all, known before any traffic; None when it may.
    ``hvd``: horovod.torch, for Horovod (``version``: its version)."""
    if framework == "horovod":
        name = HOROVOD_NAMES.get(collective)
        if name is None or not hasattr(hvd, name):
            have = ", ".join(n for n in HOROVOD_NAMES.values() if hasattr(hvd, n))
            return f"Horovod {version} has no {collective} (its collectives: {have})"
    if collective == "sendrecv" and world == 1 and backend == "gloo":
        return "sendrecv at 1 rank sends to the rank itself, which Gloo cannot (a Gloo pair needs a peer)"
    return None


# --- what each rank sends and must end with ------------------------------------------------------------------
def _small(rank: int, idx: Any) -> Any:
    return (idx + rank) % 4 + 1


def _tag(rank: int, idx: Any) -> Any:
    return (idx + 31 * rank) % 251 + 1


def input_values(collective: str, rank: int, idx: Any) -> Any:
    """Element ``idx`` of this rank's input (int64)."""
    return _small(rank, idx) if SPECS[collective].reduces else _tag(rank, idx)


def expected_values(collective: str, rank: int, n: int, count: int, idx: Any) -> Any:
    """Element ``idx`` of this rank's result (int64), or None where nccl-tests checks nothing (reduce off root)."""
    if collective == "all_reduce":
        return sum(_small(r, idx) for r in range(n))
    if collective == "reduce":
        return sum(_small(r, idx) for r in range(n)) if rank == SPECS["reduce"].root else None
    if collective == "reduce_scatter":
        return sum(_small(r, idx + rank * count) for r in range(n))
    if collective == "all_gather":
        return _tag(idx // count, idx % count)
    if collective == "broadcast":
        return _tag(SPECS["broadcast"].root, idx)
    if collective == "alltoall":  # block j came from rank j's block for this rank
        return _tag(idx // count, rank * count + idx % count)
    return _tag((rank - 1) % n, idx)  # sendrecv: from the previous rank


def fill(torch: Any, collective: str, rank: int, t: Any) -> None:
    for start in range(0, t.numel(), CHUNK):
        stop = min(start + CHUNK, t.numel())
        t[start:stop] = input_values(collective, rank, torch.arange(start, stop, dtype=torch.int64)).to(t.dtype)


def count_wrong(torch: Any, collective: str, got: Any, rank: int, n: int, count: int) -> int:
    """Elements of this rank's result that differ from the exact one."""
    got = got.reshape(-1)
    wrong = 0
    for start in range(0, got.numel(), CHUNK):
        stop = min(start + CHUNK, got.numel())
        want = expected_values(collective, rank, n, count, torch.arange(start, stop, dtype=torch.int64))
        if want is not None:
            wrong += int((got[start:stop].cpu() != want.to(got.dtype)).sum())
    return wrong


# --- the calls ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """One mode of one collective at one count: ``source`` is where this rank's input goes, ``run()`` does one
    operation and returns the tensor that holds this rank's result."""

    source: Any
    run: Callable[[], Any]


def _staged(op: Callable[[Any, Any], Any], buf: Any, scratch: Any) -> Call:
    """In place through a scratch copy: the input is copied aside, the result lands in ``buf``."""
    return Call(buf, lambda: (scratch.copy_(buf), op(scratch, buf), buf)[2])


def torch_calls(dist: Any, collective: str, a: Any, b: Any, count: int, rank: int, n: int) -> dict[str, Call]:
    """out-of-place and in-place over torch.distributed (gloo, nccl, mpi, ccl alike), on buffers ``a`` and ``b``."""
    c, mine = count, slice(rank * count, (rank + 1) * count)
    if collective in ("all_reduce", "broadcast", "reduce"):
        one = {"all_reduce": lambda t: dist.all_reduce(t), "broadcast": lambda t: dist.broadcast(t, src=0),
               "reduce": lambda t: dist.reduce(t, dst=0)}[collective]
        src, dst = a[:c], b[:c]
        return {"out-of-place": Call(src, lambda: (dst.copy_(src), one(dst), dst)[2]),
                "in-place": Call(src, lambda: (one(src), src)[1])}
    if collective == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        out, part, own = b[:n * c], a[:c], b[mine]  # views made once: slicing inside the timed call costs ~1 us
        return {"out-of-place": Call(part, lambda: (gather(out, part), out)[1]),
                "in-place": Call(own, lambda: (gather(out, own), out)[1])}
    if collective == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        src, dst = a[:n * c], b[:c]
        own = src[mine]
        return {"out-of-place": Call(src, lambda: (scatter(dst, src), dst)[1]),
                "in-place": Call(src, lambda: (scatter(own, src), own)[1])}
    if collective == "alltoall":
        def op(s: Any, d: Any) -> Any:
            return dist.all_to_all_single(d, s)
        length = n * c
    else:  # sendrecv: to the next rank, from the previous one, in one batch (NCCL groups them)
        def op(s: Any, d: Any) -> Any:
            for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, s, (rank + 1) % n),
                                             dist.P2POp(dist.irecv, d, (rank - 1) % n)]):
                w.wait()
        length = c
    src, dst = a[:length], b[:length]
    return {"out-of-place": Call(src, lambda: (op(src, dst), dst)[1]), "in-place": _staged(op, src, dst)}


def horovod_calls(hvd: Any, collective: str, a: Any, b: Any, count: int, rank: int, n: int) -> dict[str, Call]:
    """out-of-place and in-place over Horovod (its controller and tensor operations, as the backend chose)."""
    c, mine = count, slice(rank * count, (rank + 1) * count)
    # Named, so Horovod's response cache skips the coordinator's negotiation after the first call: an unnamed
    # op gets a fresh name each time and was 6x slower (17 against 2.7 ms for 1 KB over Gloo on the minicluster).
    o, i = (f"hpcbench.{collective}.{place}.{c}.{a.dtype}" for place in ("out", "in"))
    part = a[:c]  # one view, made outside the timed calls
    if collective == "all_reduce":
        return {"out-of-place": Call(part, lambda: hvd.allreduce(part, op=hvd.Sum, name=o)),
                "in-place": Call(part, lambda: hvd.allreduce_(part, op=hvd.Sum, name=i))}
    if collective == "broadcast":
        return {"out-of-place": Call(part, lambda: hvd.broadcast(part, root_rank=0, name=o)),
                "in-place": Call(part, lambda: hvd.broadcast_(part, root_rank=0, name=i))}
    if collective == "all_gather":
        out = b[:n * c]
        own = out[mine]
        return {"out-of-place": Call(part, lambda: hvd.allgather(part, name=o)),
                "in-place": Call(own, lambda: out.copy_(hvd.allgather(own, name=i)))}
    if collective == "reduce_scatter":
        src = a[:n * c]
        own = src[mine]
        return {"out-of-place": Call(src, lambda: hvd.reducescatter(src, op=hvd.Sum, name=o)),
                "in-place": Call(src, lambda: own.copy_(hvd.reducescatter(src, op=hvd.Sum, name=i)))}
    src = a[:n * c]  # alltoall: equal splits; 0.28 returns the tensor, later ones (tensor, received splits)

    def alltoall(t: Any, name: str) -> Any:
        out = hvd.alltoall(t, name=name)
        return out[0] if isinstance(out, tuple) else out

    return {"out-of-place": Call(src, lambda: alltoall(src, o)), "in-place": Call(src, lambda: src.copy_(alltoall(src, i)))}
