"""nccl-tests' collectives, one entry each: everything hpcbench knows of a collective is said here, once.

An entry (``Collective``) holds its name (nccl-tests': its binary is ``<name>_perf``), its busbw factor as
nccl-tests computes it and as the report prints it, what its size, redop and root columns mean, the exact
result each rank must hold, its torch.distributed call and its Horovod call (or why Horovod has none).
vocab.COLLECTIVES, the ``collective`` key's choices, the report's titles and factors and the parser's test
names are derived from ``TABLE``: adding a collective is one entry here, plus its tests.

The definitions are nccl-tests' own (NVIDIA/nccl-tests at a0b82b2, NCCL_TESTS_VERSION 2.19.6):

- size and count (src/common.cu:900-912 setupArgs, :938 the printed row; each src/<name>.cu GetCollByteCount):
  count = size / sizeof(dtype) for all_reduce, broadcast, reduce and sendrecv, and the printed size is count x
  sizeof. A ``shared`` collective (all_gather, reduce_scatter, alltoall, gather) prints the whole buffer: count
  is one rank's share, (size / sizeof / n) rounded down to a multiple of 16 bytes (src/all_gather.cu:11,
  src/reduce_scatter.cu:11, src/alltoall.cu:19, src/gather.cu:11), and size = n x count x sizeof. A size whose
  share rounds down to 0 is not run here (nccl-tests times a 0-byte call there).
- algbw = size / time; busbw = algbw x factor (doc/PERFORMANCE.md:134-143 "Summary"; each entry cites its GetBw).
- redop: "none" where nothing is reduced, else "sum"; root: 0 (nccl-tests' default -r, src/common.cu:103) for
  the rooted collectives, else -1.

In-place is nccl-tests' in-place: the result lands in the buffer that held the input (all_gather and gather:
the input is the rank's slice of the output; reduce_scatter: the output is the rank's slice of the input).
Where the library has no call for one of the two modes, it is written as a user would: a copy plus the
library's other call.

Each rank's result is checked element by element after timing: reductions sum small integers (1-4), so every
partial sum is exact even in float16/bfloat16; data movement carries a tag of the sending rank and position
((i + 31 r) mod 251 + 1), so a block from the wrong rank or place is caught.

Plain Python: torch.distributed and horovod.torch come in as arguments (``dist``, ``hvd``), so that planning
on a login node imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OOP, IP = "out-of-place", "in-place"


@dataclass(frozen=True)
class Call:
    """One mode of one collective at one count: ``source`` is where this rank's input goes, ``run()`` does one
    operation and returns the tensor that holds this rank's result."""

    source: Any
    run: Callable[[], Any]


@dataclass(frozen=True)
class Buffers:
    """What a call is made on: two buffers of the largest size, the count (one rank's share where ``shared``),
    this rank and the number of ranks."""

    a: Any
    b: Any
    count: int
    rank: int
    n: int

    @property
    def mine(self) -> slice:
        return slice(self.rank * self.count, (self.rank + 1) * self.count)


Calls = dict[str, Call]  # {OOP: ..., IP: ...}


@dataclass(frozen=True)
class Horovod:
    op: str  # horovod.torch's name of it: a Horovod without it says so
    calls: Callable[[Any, Buffers, str, str], Calls]  # (hvd, buffers, out-of-place name, in-place name)


def _any_backend(backend: str, world: int) -> str | None:
    return None


@dataclass(frozen=True)
class Collective:
    """One collective, as nccl-tests defines it and as each library calls it."""

    name: str  # nccl-tests' name: its binary is <name>_perf
    title: str  # the report's heading
    formula: str  # busbw = algbw x formula, as the report prints it (n: ranks)
    factor: Callable[[int], float]  # the same, as nccl-tests' GetBw computes it
    redop: str  # the redop column nccl-tests prints
    root: int  # the root column: the root rank, or -1
    shared: bool  # size is the whole buffer, n x one rank's count
    reduces: bool  # its result is a sum over ranks (else it moves data)
    # element idx of this rank's result (rank, n, count, idx), or None where nccl-tests checks nothing
    expected: Callable[[int, int, int, Any], Any]
    torch: Callable[[Any, Buffers], Calls]  # over torch.distributed (gloo, nccl, mpi, ccl alike)
    horovod: Horovod | str  # its Horovod call, or why Horovod has none
    size: str = ""  # what the printed size is, where it is not one rank's buffer (said in the report)
    refuse: Callable[[str, int], str | None] = _any_backend  # (backend, ranks): why it cannot run there

    def shape(self, size: int, elsize: int, n: int) -> tuple[int, int]:
        """(count, size) as nccl-tests prints them for a requested ``size`` in bytes; count 0: nothing to run."""
        if self.shared:
            count = (size // elsize // n) & ~(max(16 // elsize, 1) - 1)
            return count, count * n * elsize
        count = max(1, size // elsize)  # hpcbench has always run at least one element
        return count, count * elsize

    def input(self, rank: int, idx: Any) -> Any:
        """Element ``idx`` of this rank's input (int64)."""
        return _small(rank, idx) if self.reduces else _tag(rank, idx)


# --- what each rank sends ------------------------------------------------------------------------------------
def _small(rank: int, idx: Any) -> Any:
    return (idx + rank) % 4 + 1


def _tag(rank: int, idx: Any) -> Any:
    return (idx + 31 * rank) % 251 + 1


def _sum(n: int, idx: Any) -> Any:
    return sum(_small(r, idx) for r in range(n))


def _gathered(count: int, idx: Any) -> Any:  # block j of the result is rank j's input
    return _tag(idx // count, idx % count)


def _ring(n: int) -> float:
    return (n - 1) / n


# --- calls shared by several entries ---------------------------------------------------------------------------
def _in_place_call(op: Callable[[Any, Any], Any]) -> Callable[[Any, Buffers], Calls]:
    """torch.distributed's call works in place: out of place is a copy plus it."""
    def calls(dist: Any, x: Buffers) -> Calls:
        src, dst = x.a[:x.count], x.b[:x.count]
        return {OOP: Call(src, lambda: (dst.copy_(src), op(dist, dst), dst)[2]),
                IP: Call(src, lambda: (op(dist, src), src)[1])}
    return calls


def _two_buffer_call(op: Callable[[Any, Any, Any, Buffers], Any], length: Callable[[Buffers], int]
                     ) -> Callable[[Any, Buffers], Calls]:
    """A call whose buffers may not alias: in place goes through a scratch copy of the input."""
    def calls(dist: Any, x: Buffers) -> Calls:
        src, dst = x.a[:length(x)], x.b[:length(x)]
        return {OOP: Call(src, lambda: (op(dist, src, dst, x), dst)[1]),
                IP: Call(src, lambda: (dst.copy_(src), op(dist, dst, src, x), src)[2])}
    return calls


def _hvd_args(hvd: Any, kw: dict[str, Any]) -> dict[str, Any]:
    """A call's keyword arguments; op="Sum" names the reduction hvd.Sum."""
    return {k: (getattr(hvd, v) if k == "op" else v) for k, v in kw.items()}


def _hvd_in_place(func: str, **kw: Any) -> Horovod:
    """Horovod's ``func`` and ``func_`` (in place), on this rank's buffer."""
    def calls(hvd: Any, x: Buffers, o: str, i: str) -> Calls:
        part, more = x.a[:x.count], _hvd_args(hvd, kw)
        return {OOP: Call(part, lambda: getattr(hvd, func)(part, name=o, **more)),
                IP: Call(part, lambda: getattr(hvd, f"{func}_")(part, name=i, **more))}
    return Horovod(func, calls)


def _hvd_out_of_place(func: str, source: Callable[[Buffers], tuple[Any, Any, Any]], **kw: Any) -> Horovod:
    """Horovod's ``func``, which returns a new tensor: in place is it plus a copy into the buffer that held the
    input. ``source``: (out-of-place input, in-place input, where the in-place result goes)."""
    def calls(hvd: Any, x: Buffers, o: str, i: str) -> Calls:
        more = _hvd_args(hvd, kw)

        def one(t: Any, name: str) -> Any:
            out = getattr(hvd, func)(t, name=name, **more)
            return out[0] if isinstance(out, tuple) else out  # alltoall since 0.29: (tensor, received splits)
        src, own, dst = source(x)
        return {OOP: Call(src, lambda: one(src, o)), IP: Call(own, lambda: dst.copy_(one(own, i)))}
    return Horovod(func, calls)


# --- the entries -------------------------------------------------------------------------------------------------
def _torch_all_gather(dist: Any, x: Buffers) -> Calls:
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    out, part, own = x.b[:x.n * x.count], x.a[:x.count], x.b[x.mine]  # views made once: ~1 us each in the loop
    return {OOP: Call(part, lambda: (gather(out, part), out)[1]), IP: Call(own, lambda: (gather(out, own), out)[1])}


def _torch_reduce_scatter(dist: Any, x: Buffers) -> Calls:
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    src, dst = x.a[:x.n * x.count], x.b[:x.count]
    own = src[x.mine]
    return {OOP: Call(src, lambda: (scatter(dst, src), dst)[1]), IP: Call(src, lambda: (scatter(own, src), own)[1])}


def _sendrecv(dist: Any, s: Any, d: Any, x: Buffers) -> None:
    """To the next rank, from the previous one, in one batch (NCCL groups them)."""
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, s, (x.rank + 1) % x.n),
                                     dist.P2POp(dist.irecv, d, (x.rank - 1) % x.n)]):
        w.wait()


def _sendrecv_refuses(backend: str, world: int) -> str | None:
    if world == 1 and backend == "gloo":
        return "sendrecv at 1 rank sends to the rank itself, which Gloo cannot (a Gloo pair needs a peer)"
    return None


def _torch_gather(dist: Any, x: Buffers) -> Calls:
    out, part, own = x.b[:x.n * x.count], x.a[:x.count], x.b[x.mine]
    blocks = list(out.split(x.count)) if x.rank == 0 else None  # the root's: one view per rank's block
    return {OOP: Call(part, lambda: (dist.gather(part, blocks, dst=0), out)[1]),
            IP: Call(own, lambda: (dist.gather(own, blocks, dst=0), out)[1])}


NO_ROOTED = "its collectives leave the result on every rank; hpcbench does not time those as a rooted one"
TABLE: dict[str, Collective] = {c.name: c for c in (
    # src/all_reduce.cu:59-64
    Collective("all_reduce", "Allreduce", "2(n−1)/n", lambda n: 2 * (n - 1) / n, "sum", -1, False, True,
               lambda rank, n, count, idx: _sum(n, idx), _in_place_call(lambda dist, t: dist.all_reduce(t)),
               _hvd_in_place("allreduce", op="Sum")),
    # src/all_gather.cu:38-43
    Collective("all_gather", "All-gather", "(n−1)/n", _ring, "none", -1, True, False,
               lambda rank, n, count, idx: _gathered(count, idx), _torch_all_gather,
               _hvd_out_of_place("allgather", lambda x: (x.a[:x.count], x.b[x.mine], x.b[:x.n * x.count])),
               size="the gathered buffer, n × each rank's share"),
    # src/reduce_scatter.cu:37-42
    Collective("reduce_scatter", "Reduce-scatter", "(n−1)/n", _ring, "sum", -1, True, True,
               lambda rank, n, count, idx: _sum(n, idx + rank * count), _torch_reduce_scatter,
               _hvd_out_of_place("reducescatter", lambda x: (x.a[:x.n * x.count], x.a[:x.n * x.count],
                                                             x.a[x.mine]), op="Sum"),
               size="the whole input, n × each rank's share"),
    # src/broadcast.cu:34-39
    Collective("broadcast", "Broadcast", "1", lambda n: 1.0, "none", 0, False, False,
               lambda rank, n, count, idx: _tag(0, idx), _in_place_call(lambda dist, t: dist.broadcast(t, src=0)),
               _hvd_in_place("broadcast", root_rank=0)),
    # src/reduce.cu:36-39; nccl-tests checks the root alone
    Collective("reduce", "Reduce", "1", lambda n: 1.0, "sum", 0, False, True,
               lambda rank, n, count, idx: _sum(n, idx) if rank == 0 else None,
               _in_place_call(lambda dist, t: dist.reduce(t, dst=0)), NO_ROOTED),
    # src/alltoall.cu:48-53; block j of the result came from rank j's block for this rank
    Collective("alltoall", "All-to-all", "(n−1)/n", _ring, "none", -1, True, False,
               lambda rank, n, count, idx: _tag(idx // count, rank * count + idx % count),
               _two_buffer_call(lambda dist, s, d, x: dist.all_to_all_single(d, s), lambda x: x.n * x.count),
               _hvd_out_of_place("alltoall", lambda x: (x.a[:x.n * x.count],) * 3),
               size="the whole buffer, n × the block for each peer"),
    # src/sendrecv.cu:38-43; rank r sends to r+1 and receives from r-1 (src/sendrecv.cu:51-59)
    Collective("sendrecv", "Send/receive", "1", lambda n: 1.0, "sum", -1, False, False,
               lambda rank, n, count, idx: _tag((rank - 1) % n, idx), _two_buffer_call(_sendrecv, lambda x: x.count),
               "it has no point-to-point send and receive", refuse=_sendrecv_refuses),
    # src/gather.cu:38-44 (factor), :10-16 (each rank's share; the whole buffer printed), :30-32 (the root's
    # expected buffer: every rank's block in rank order). The root alone is checked here: nccl-tests also checks
    # that a non-root's buffer is left as it was.
    Collective("gather", "Gather", "(n−1)/n", _ring, "none", 0, True, False,
               lambda rank, n, count, idx: _gathered(count, idx) if rank == 0 else None, _torch_gather, NO_ROOTED,
               size="the gathered buffer, n × each rank's share"),
)}
# nccl-tests' and rccl-tests' other binaries: read in their logs, never run by hpcbench
OTHER_TESTS = ("allgather", "alltoallv", "scatter", "hypercube", "all_reduce_bench")
