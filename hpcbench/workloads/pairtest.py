"""The hunt's two measurements, run on the nodes by `hpcbench hunt` (one job step each):

    python -m hpcbench.workloads.pairtest pair  [--bytes B] [--iters I] [--repeats R] [--backend auto|gloo|nccl]
    python -m hpcbench.workloads.pairtest probe [--repeats R]

``pair`` (2 ranks, one per node): point-to-point bandwidth, rank 0 sending B bytes to rank 1 and back I times
(bytes moved / time, both directions), and the latency of a small (8-byte) allreduce; one figure per repeat,
after one untimed warm-up. The rendezvous is MASTER_ADDR/MASTER_PORT, which the hunt sets per step: a step of
a larger allocation sees the job's node list, not its own. ``probe`` (one rank per node): a fixed compute step
on one thread (a pure-Python integer loop), so that a node's slow compute is told apart from its slow link.

Each rank that reports prints one JSON line, prefixed with ``hpcbench-hunt:``, on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hpcbench.workloads.provenance import kernel_id

PREFIX = "hpcbench-hunt:"


def _emit(obj: dict[str, Any]) -> None:
    print(PREFIX + json.dumps(obj), flush=True)


def _node() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


TURN_S = 0.01  # a probe lets go of the CPUs this long between its runs, so that the others waiting take their turn


def probe(repeats: int, inner: int = 3_500_000) -> dict[str, Any]:
    # About 0.3 s on a core: several of the kernel's 100 ms CFS periods, so that a CPU quota shows in full (at
    # 30 ms a repeat, a 30% quota slowed the step 1x to 6x depending on where the periods fell). Pure Python on
    # one thread: nothing to import, so a probe that takes its turn (_own_cpus) is not disturbed by the others
    # starting up (torch's import is seconds of CPU).
    out = []
    cpus = sorted(os.sched_getaffinity(0))
    waited = 0.0
    # Probes that share CPUs take them one run at a time, in turns: this host's speed drifts by a third over
    # seconds (a VM's neighbours, clocks), and nodes probed one after another whole measured the drift (a healthy
    # node of four at 0.42 and 0.32 s against 0.25); in turns, every node's runs fall in the same seconds.
    # Each run on the last of its CPUs (the first takes most interrupts): the probes of nodes that share a host's
    # CPUs then all measure the same one (two vCPUs of a VM differ, one sharing its core with a neighbour's work).
    for i in range(repeats + 1):
        asked = time.perf_counter()
        with _own_cpus(cpus):
            waited += time.perf_counter() - asked
            os.sched_setaffinity(0, cpus[-1:])
            try:
                t0 = time.perf_counter()
                _spin(inner)
                took = time.perf_counter() - t0
            finally:
                with contextlib.suppress(OSError):  # the node's cpuset changed meanwhile: the run counts all the same
                    os.sched_setaffinity(0, cpus)
        if i:  # the first is the warm-up
            out.append(took)
        time.sleep(TURN_S)
    # host "": no boot id, never taken for one host
    return {"kind": "probe", "node": _node(), "seconds": out, "host": kernel_id() or "", "cpus": cpus,
            "waited_s": waited}


def _spin(n: int) -> int:
    x = 0
    for i in range(n):
        x = (x * 31 + i) & 0xFFFFFFFF
    return x


@contextlib.contextmanager
def _own_cpus(cpus: list[int]) -> Iterator[None]:
    """Hold a lock per CPU of this kernel (files in /dev/shm, which is the kernel's), taken in order: probes of
    nodes that share CPUs of one host (virtual nodes, as the minicluster's beyond its cores) run one at a time
    instead of measuring each other; on real nodes nothing is shared and nothing waits."""
    where = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    with contextlib.ExitStack() as held:
        for c in cpus:
            f = held.enter_context(open(where / f"hpcbench-probe-cpu{c}.lock", "a"))
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def pair(nbytes: int, iters: int, repeats: int, backend: str) -> dict[str, Any] | None:
    import torch
    import torch.distributed as dist

    from hpcbench.workloads.distenv import from_environ

    env = from_environ()
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    device = torch.device(f"cuda:{env.local_rank}" if backend == "nccl" else "cpu")
    dist.init_process_group(backend, init_method=f"tcp://{env.master_addr}:{env.master_port}",
                            rank=env.rank, world_size=env.world_size)
    buf = torch.zeros(max(1, nbytes // 4), dtype=torch.float32, device=device)
    small = torch.zeros(2, dtype=torch.float32, device=device)
    peer = 1 - env.rank
    bandwidth, latency = [], []
    for i in range(repeats + 1):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            if env.rank == 0:
                dist.send(buf, peer)
                dist.recv(buf, peer)
            else:
                dist.recv(buf, peer)
                dist.send(buf, peer)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        bw = 2 * iters * buf.numel() * 4 / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(small)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        lat = (time.perf_counter() - t0) / iters
        if i:
            bandwidth.append(bw)
            latency.append(lat)
    nodes: list[Any] = [None, None]
    dist.all_gather_object(nodes, _node())
    dist.destroy_process_group()
    if env.rank:
        return None
    return {"kind": "pair", "a": nodes[0], "b": nodes[1], "backend": backend, "bytes": buf.numel() * 4,
            "bandwidth": bandwidth, "latency": latency}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m hpcbench.workloads.pairtest", description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("pair", "probe"))
    ap.add_argument("--bytes", type=int, default=8 << 20)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
    a = ap.parse_args(argv)
    got = probe(a.repeats) if a.mode == "probe" else pair(a.bytes, a.iters, a.repeats, a.backend)
    if got is not None:
        _emit(got)


if __name__ == "__main__":
    main()
