"""One rank of the communication benchmark: ``python -m hpcbench.workloads.collective --help``.

A collective of nccl-tests (``collective``: each entry of hpcbench/collectives.py) over torch.distributed (DDP's
communication layer: gloo, nccl, mpi, ccl) and over Horovod (mpi, gloo, nccl, ccl; the collectives it has),
with nccl-tests' definitions, printed in nccl-tests' layout for that collective:

- sizes min_bytes, min_bytes*step_factor, ... <= max_bytes, each as nccl-tests counts it for the collective;
- per size, ``warmup_iters`` untimed operations, then ``iters`` timed back to back between two
  device synchronisations; a rank's time is elapsed / iters; the reported time is the slowest rank's;
- algbw = size / time; busbw = algbw x nccl-tests' factor for the collective (all_reduce: 2(n-1)/n);
- in-place and out-of-place as nccl-tests means them; a mode the library has no call for is written as a
  user would (a copy plus the other call);
- timed buffers hold zeros, so repeated sums stay finite; after timing, each rank fills its input with small
  integers and one more operation is checked element by element against the exact result (#wrong, summed
  over ranks);
- a collective the library does not have (Horovod's reduce, a type it refuses) is recorded with the
  library's reason (``unsupported``), and nothing is timed.

The kind's first name was "allreduce": point ids still hash that name (vocab.FIRST_NAMES), so they never changed.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench.collectives import TABLE
from hpcbench.files import atomic_write_json, utcnow
from hpcbench.records import AllreduceRow, ResultRecord
from hpcbench.rundir import PointPaths
from hpcbench.workloads import affinity, frameworks, placement, provenance, transport
from hpcbench.workloads import summary as summary_line
from hpcbench.workloads.collectives import (
    UNSUPPORTED_RE,
    Call,
    count_wrong,
    fill,
    horovod_calls,
    static_reason,
    torch_calls,
)
from hpcbench.workloads.common import params_seen, rank_info, rank_main, require, versions
from hpcbench.workloads.config import CollectiveConfig
from hpcbench.workloads.distenv import DistEnv

NCCL_TYPE = {"float32": "float", "float64": "double", "float16": "half", "bfloat16": "bfloat16",
             "int32": "int32", "int64": "int64"}
MEASUREMENT = (
    "per size (as nccl-tests counts it for the collective): warm-up ops untimed, then iters ops back to back "
    "between device synchronisations; time = slowest rank's elapsed/iters; algbw = bytes/time, busbw = algbw x "
    "nccl-tests' factor for the collective; in-place and out-of-place as in nccl-tests (a mode the library lacks: "
    "a copy plus its other call); #wrong = elements differing from the exact result, over all ranks. "
    "throughput = in-place busbw (GB/s) at the largest size; mean_step_time_s = its time"
)


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


def algbw(size: int, time_us: float) -> float:
    """GB/s (1e9 bytes, as nccl-tests)."""
    return size / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0


class Comm:
    """The operations the benchmark needs, on the same framework objects training uses."""

    def __init__(self, cfg: CollectiveConfig, env: DistEnv):
        import torch

        self.framework, self.backend, self.env, self.torch = cfg.framework, cfg.backend, env, torch
        self.fw = frameworks.make(cfg, env)  # type: ignore[arg-type]  # a RankConfig with the same fields
        self.version = ""
        if cfg.framework == "horovod":
            import horovod

            self.hvd = hvd = self.fw.hvd  # type: ignore[attr-defined]
            self.version = horovod.__version__
            controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "unknown"
            ops = [f"{k}={v}" for k, v in os.environ.items() if k in ("HOROVOD_CPU_OPERATIONS", "HOROVOD_GPU_OPERATIONS")]
            self.describe = f"horovod {horovod.__version__} controller={controller} {' '.join(ops)}"
        else:
            import torch.distributed as dist

            self.dist = dist
            self.describe = f"torch.distributed backend={dist.get_backend()}"

    def calls(self, collective: str, a: Any, b: Any, count: int) -> dict[str, Call]:
        make = horovod_calls if self.framework == "horovod" else torch_calls
        lib = self.hvd if self.framework == "horovod" else self.dist
        return make(lib, collective, a, b, count, self.env.rank, self.env.world_size)

    def unsupported(self, collective: str, a: Any, b: Any, count: int) -> str | None:
        """Why the library cannot run ``collective`` on these buffers, from its own answer; None when it can."""
        why = static_reason(collective, self.framework, self.backend, self.env.world_size,
                            getattr(self, "hvd", None), self.version)
        if why:
            return why
        try:
            for call in self.calls(collective, a, b, count).values():
                call.run()
        except Exception as e:
            if not UNSUPPORTED_RE.search(str(e)):
                raise
            return f"{self.describe}: {collective} of {a.dtype}: {type(e).__name__}: {str(e).strip().splitlines()[0]}"
        return None

    def reduce(self, value: float, op: str) -> float:
        t = self.torch.tensor([value], dtype=self.torch.float64)
        if self.framework == "horovod":
            return float(self.hvd.allreduce(t, op=self.hvd.Max if op == "max" else self.hvd.Sum, name=f"hpcbench.{op}")[0])
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX if op == "max" else self.dist.ReduceOp.SUM)
        return float(t[0])

    def gather(self, obj: Any) -> list[Any]:
        return self.fw.allgather(obj)

    def close(self) -> None:
        self.fw.close()


@dataclass(frozen=True)
class Measured:
    time_us: float
    wrong: int


@dataclass(frozen=True)
class Row:
    size: int  # bytes, as nccl-tests prints them for the collective
    count: int  # elements per call (one rank's share for all_gather, reduce_scatter, alltoall)
    oop: Measured
    ip: Measured


@dataclass
class Measurement:
    rows: list[Row]
    skipped: list[int]  # requested sizes whose share per rank rounds down to 0 elements
    unsupported: str | None = None


def _timed(comm: Comm, cfg: CollectiveConfig, call: Call, sync: Any) -> float:
    """This rank's mean time per operation, in seconds."""
    for _ in range(cfg.warmup_iters):
        call.run()
    comm.reduce(0.0, "sum")  # every rank starts the timed loop together
    sync()
    t0 = time.perf_counter()
    for _ in range(cfg.iters):
        call.run()
    sync()
    return (time.perf_counter() - t0) / cfg.iters


def measure(comm: Comm, cfg: CollectiveConfig, device: Any, sync: Any) -> Measurement:
    """Every size of ``cfg.collective``, out of place then in place; or why the library cannot run it."""
    torch, world, rank = comm.torch, comm.env.world_size, comm.env.rank
    dtype = getattr(torch, cfg.dtype)
    elsize = torch.empty(0, dtype=dtype).element_size()
    top = max(1, cfg.max_bytes // elsize)
    a, b = (torch.zeros(top, dtype=dtype, device=device) for _ in range(2))
    shape = TABLE[cfg.collective].shape
    wanted = [(s, *shape(s, elsize, world)) for s in sizes(cfg.min_bytes, cfg.max_bytes, cfg.step_factor)]
    plan = [(count, size) for _, count, size in wanted if count > 0]
    out = Measurement([], [s for s, count, _ in wanted if count == 0])
    if not plan:
        out.unsupported = (f"no size up to max_bytes = {cfg.max_bytes} gives each of the {world} ranks 16 bytes of "
                           f"{cfg.collective} (nccl-tests' unit): raise max_bytes")
        return out
    out.unsupported = comm.unsupported(cfg.collective, a, b, plan[0][0])
    if out.unsupported:
        return out
    for count, size in plan:
        results = []
        for mode, call in comm.calls(cfg.collective, a, b, count).items():
            used = min(top, world * count)
            a[:used].zero_()
            b[:used].zero_()
            mine = _timed(comm, cfg, call, sync)
            # every rank's last timed operation is over before any rank overwrites its input (a library may still
            # be sending from it): nccl-tests' Barrier before initData (src/common.cu:798)
            comm.reduce(0.0, "sum")
            fill(torch, cfg.collective, rank, call.source)
            res = call.run()
            sync()
            wrong = comm.reduce(float(count_wrong(torch, cfg.collective, res, rank, world, count)), "sum")
            results.append((mode, Measured(comm.reduce(mine, "max") * 1e6, int(wrong))))
        got = dict(results)
        out.rows.append(Row(size, count, got["out-of-place"], got["in-place"]))
    return out


def _time_str(us: float) -> str:
    # nccl-tests' precision steps, so that its parsers read ours.
    return f"{us:7.0f}" if us >= 10000 else (f"{us:7.1f}" if us >= 100 else f"{us:7.2f}")


def format_table(cfg: CollectiveConfig, world: int, ranks: list[dict[str, Any]], m: Measurement,
                 describe: str) -> str:
    """The output of nccl-tests' <collective>_perf, line for line, for our measurement."""
    spec, typ = TABLE[cfg.collective], NCCL_TYPE[cfg.dtype]
    lines = [(f"# nThread 1 nGpus 1 minBytes {cfg.min_bytes} maxBytes {cfg.max_bytes} step: {cfg.step_factor}(factor) "
              f"warmup iters: {cfg.warmup_iters} iters: {cfg.iters} agg iters: 1 validation: 1 graph: 0"),
             f"# hpcbench {cfg.collective}: {describe}, device {cfg.device}, {world} ranks",
             "#", "# Using devices"]
    for r in ranks:
        lines.append(f"#  Rank {r['rank']:2d} Group  0 Pid {r['pid']:6d} on {r['host']:>10s} device "
                     f"{r['local_rank']:2d} [0x{r['bus']:02x}] {r['device']}")
    if m.unsupported:
        return "\n".join([*lines, f"# unsupported: {m.unsupported}", "#"]) + "\n"
    if m.skipped:
        lines.append(f"# not run: {', '.join(map(str, m.skipped))} B: less than 16 bytes per rank of "
                     f"{cfg.collective} over {world} ranks (nccl-tests times a 0-byte call there)")
    lines += ["#",
              "#                                                              out-of-place                       in-place          ",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "]
    bws = []
    for row in m.rows:
        line = f"{row.size:12d}  {row.count:12d}  {typ:>8s}  {spec.redop:>6s}  {spec.root:6d}"
        for x in (row.oop, row.ip):
            alg = algbw(row.size, x.time_us)
            bws.append(alg * spec.factor(world))
            line += f"  {_time_str(x.time_us)}  {alg:6.2f}  {bws[-1]:6.2f}  {x.wrong:5d}"
        lines.append(line)
    wrong = sum(x.wrong for row in m.rows for x in (row.oop, row.ip))
    lines += [f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
              f"# Avg bus bandwidth    : {sum(bws) / max(len(bws), 1):.6g} ", "#",
              f"# Collective test concluded: {cfg.collective}_perf"]
    return "\n".join(lines) + "\n"


def to_rows(cfg: CollectiveConfig, world: int, rows: list[Row]) -> list[AllreduceRow]:
    out = []
    spec = TABLE[cfg.collective]
    f = spec.factor(world)
    for row in rows:
        a, b = algbw(row.size, row.ip.time_us), algbw(row.size, row.oop.time_us)
        out.append(AllreduceRow(size_bytes=row.size, count=row.count, dtype=cfg.dtype, time_us=row.ip.time_us,
                                algbw_gbps=a, busbw_gbps=a * f, wrong=row.ip.wrong, oop_time_us=row.oop.time_us,
                                oop_algbw_gbps=b, oop_busbw_gbps=b * f, oop_wrong=row.oop.wrong,
                                collective=cfg.collective, redop=spec.redop, root=spec.root))
    return out


def run(cfg: CollectiveConfig, env: DistEnv) -> ResultRecord | None:
    import torch

    paths = PointPaths(Path(cfg.out))
    prov = provenance.start(paths.provenance(env.rank), env.rank, env.local_rank)
    require(cfg.framework, cfg.backend, cfg.device)
    torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
    cuda = cfg.device == "cuda"
    device, sync, index = placement.use_device(cfg.device, env.local_rank)
    placement.record_pairing(prov, env.rank, env.local_rank, cfg.device, index)
    transport.record(prov, cfg.framework, cfg.backend, env.local_rank)

    started = utcnow()
    comm = Comm(cfg, env)
    try:
        m = measure(comm, cfg, device, sync)
        doc = prov.finish()
        me = rank_info(env)
        # the device properties have pci_bus_id; torch's type stubs do not say so
        bus = torch.cuda.get_device_properties(index).pci_bus_id if cuda else 0  # type: ignore[attr-defined]
        dev = {"rank": env.rank, "local_rank": env.local_rank, "pid": me.pid, "bus": bus,
               "host": me.slurm_node or me.hostname, "device": torch.cuda.get_device_name() if cuda else "cpu"}
        keep = ("rank", "hostname", "slurm_node", "affinity", "gpu_binding")
        gathered = comm.gather((me, dev, {k: doc.get(k) for k in keep}))
    finally:
        comm.close()
    if env.rank != 0:
        return None
    gathered.sort(key=lambda g: g[0].rank)
    print(format_table(cfg, env.world_size, [g[1] for g in gathered], m, comm.describe), end="", flush=True)
    ar = to_rows(cfg, env.world_size, m.rows)
    ok, detail = affinity.affinity_summary([g[2] for g in gathered])
    gpu_numa_ok, gpu_numa_detail = placement.pairing_summary([g[2]["gpu_binding"] for g in gathered])
    top = ar[-1] if ar else AllreduceRow(0, 0, cfg.dtype, 0.0, 0.0, 0.0, 0)  # unsupported: nothing was timed
    rec = ResultRecord(
        point_id=cfg.point_id, label=cfg.label, framework=cfg.framework, backend=cfg.backend, model=cfg.collective,
        device=cfg.device, batch_size=0, nodes=env.nnodes, ranks_per_node=env.world_size // max(env.nnodes, 1),
        world_size=env.world_size, warmup_steps=cfg.warmup_iters, steps=cfg.iters, step_times_s=[],
        mean_step_time_s=top.time_us * 1e-6, throughput=top.busbw_gbps,
        throughput_per_rank=top.busbw_gbps / env.world_size, ranks=[g[0] for g in gathered], started_at=started,
        finished_at=utcnow(), job_id=env.job_id, measurement=f"{comm.describe}; {MEASUREMENT}", versions=versions(),
        kind="collective", allreduce=ar, unsupported=m.unsupported, affinity_ok=ok, affinity_detail=detail,
        gpu_numa_ok=gpu_numa_ok, gpu_numa_detail=gpu_numa_detail,
        provenance=[PointPaths(Path(cfg.out)).provenance(g[0].rank).name for g in gathered], params=params_seen(cfg),
    )
    atomic_write_json(paths.result, rec.to_dict())
    return rec


def main(argv: list[str] | None = None) -> int:
    def summary(rec: ResultRecord) -> str:
        if rec.unsupported:
            return summary_line.unsupported(rec.unsupported)
        wrong = sum(r.wrong + (r.oop_wrong or 0) for r in rec.allreduce)
        last = rec.allreduce[-1]
        return summary_line.collective(last.collective, rec.throughput, last.size_bytes, wrong, rec.world_size)

    return rank_main(CollectiveConfig.from_argv(argv), run, summary)


if __name__ == "__main__":
    sys.exit(main())
