"""The communication benchmark's use of the collectives table (hpcbench/collectives.py): what a library
cannot run, each rank's input and the check of its result, and the calls over torch.distributed or Horovod."""

from __future__ import annotations

import re
from typing import Any

from hpcbench.collectives import TABLE, Buffers, Call, Horovod

# How a library says it lacks an operation or a type (Horovod: "Tensor type ... is not supported.",
# ProcessGroupMPI: "does not support reduce_scatter"): raised by every rank alike, before any traffic.
UNSUPPORTED_RE = re.compile(r"not supported|does not support|unsupported|not implemented", re.IGNORECASE)
CHUNK = 1 << 22  # elements checked at a time: the expected values of a 1 GiB buffer are never all in memory
__all__ = ["CHUNK", "Call", "UNSUPPORTED_RE", "count_wrong", "fill", "horovod_calls", "static_reason", "torch_calls"]


def static_reason(collective: str, framework: str, backend: str, world: int, hvd: Any = None,
                  version: str = "") -> str | None:
    """Why this library cannot run ``collective`` at all, known before any traffic; None when it may.
    ``hvd``: horovod.torch, for Horovod (``version``: its version)."""
    c = TABLE[collective]
    if framework == "horovod":
        op = c.horovod
        if not isinstance(op, Horovod) or not hasattr(hvd, op.op):
            have = ", ".join(h.op for h in (x.horovod for x in TABLE.values())
                             if isinstance(h, Horovod) and hasattr(hvd, h.op))
            why = f": {op}" if isinstance(op, str) else ""
            return f"Horovod {version} has no {collective} (its collectives: {have}){why}"
    return c.refuse(backend, world)


def fill(torch: Any, collective: str, rank: int, t: Any) -> None:
    c = TABLE[collective]
    for start in range(0, t.numel(), CHUNK):
        stop = min(start + CHUNK, t.numel())
        t[start:stop] = c.input(rank, torch.arange(start, stop, dtype=torch.int64)).to(t.dtype)


def count_wrong(torch: Any, collective: str, got: Any, rank: int, n: int, count: int) -> int:
    """Elements of this rank's result that differ from the exact one."""
    expected = TABLE[collective].expected
    got = got.reshape(-1)
    wrong = 0
    for start in range(0, got.numel(), CHUNK):
        stop = min(start + CHUNK, got.numel())
        want = expected(rank, n, count, torch.arange(start, stop, dtype=torch.int64))
        if want is not None:
            wrong += int((got[start:stop].cpu() != want.to(got.dtype)).sum())
    return wrong


def torch_calls(dist: Any, collective: str, a: Any, b: Any, count: int, rank: int, n: int) -> dict[str, Call]:
    """out-of-place and in-place over torch.distributed (gloo, nccl, mpi, ccl alike), on buffers ``a`` and ``b``."""
    return TABLE[collective].torch(dist, Buffers(a, b, count, rank, n))


def horovod_calls(hvd: Any, collective: str, a: Any, b: Any, count: int, rank: int, n: int) -> dict[str, Call]:
    """out-of-place and in-place over Horovod (its controller and tensor operations, as the backend chose)."""
    op = TABLE[collective].horovod
    if not isinstance(op, Horovod):
        raise ValueError(f"Horovod has no {collective}: {op}")  # static_reason says so before any call
    # Named, so Horovod's response cache skips the coordinator's negotiation after the first call: an unnamed
    # op gets a fresh name each time and was 6x slower (17 against 2.7 ms for 1 KB over Gloo on the minicluster).
    o, i = (f"hpcbench.{collective}.{place}.{count}.{a.dtype}" for place in ("out", "in"))
    return op.calls(hvd, Buffers(a, b, count, rank, n), o, i)

