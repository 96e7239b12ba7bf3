"""One rank of the allreduce benchmark: ``python -m hpcbench.workloads.allreduce --help``.

The same measurement over torch.distributed (DDP's communication layer: gloo, nccl, mpi, ccl) and
over Horovod (mpi, gloo, nccl, ccl), with nccl-tests' definitions, printed in all_reduce_perf's layout:

- sizes min_bytes, min_bytes*step_factor, ... <= max_bytes; count = size / element size;
- per size, ``warmup_iters`` untimed operations, then ``iters`` timed back to back between two
  device synchronisations; a rank's time is elapsed / iters; the reported time is the slowest rank's;
- algbw = size / time; busbw = algbw * 2(n-1)/n (the bytes each rank must send and receive in a ring);
- out-of-place: Horovod's ``allreduce`` (a new output tensor); torch.distributed has no out-of-place
  allreduce, so there it is a copy into the output buffer plus the in-place call, as a user would write it;
- in-place: ``dist.all_reduce`` / ``hvd.allreduce_`` on the buffer itself;
- timed buffers hold zeros, so repeated sums stay finite; after timing, each rank fills the buffer
  with ``(rank + i) % 4 + 1`` and one more operation is checked element by element against the
  exact sum (#wrong, summed over ranks). Small integers keep every partial sum exact even in
  float16/bfloat16.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench.files import atomic_write_json, utcnow
from hpcbench.records import AllreduceRow, ResultRecord
from hpcbench.rundir import PointPaths
from hpcbench.workloads import affinity, frameworks, placement, provenance
from hpcbench.workloads.common import params_seen, rank_info, rank_main, require, versions
from hpcbench.workloads.config import AllreduceConfig
from hpcbench.workloads.distenv import DistEnv

NCCL_TYPE = {"float32": "float", "float64": "double", "float16": "half", "bfloat16": "bfloat16",
             "int32": "int32", "int64": "int64"}
MEASUREMENT = (
    "per size: warm-up ops untimed, then iters ops back to back between device synchronisations; time = slowest "
    "rank's elapsed/iters; algbw = bytes/time, busbw = algbw*2(n-1)/n (nccl-tests); in-place = allreduce on the "
    "buffer, out-of-place = Horovod allreduce or torch copy+allreduce; #wrong = elements differing from the exact "
    "sum, over all ranks. throughput = in-place busbw (GB/s) at the largest size; mean_step_time_s = its time"
)


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


def bus_factor(n: int) -> float:
    return 2 * (n - 1) / n


def algbw(size: int, time_us: float) -> float:
    """GB/s (1e9 bytes, as nccl-tests)."""
    return size / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0


class Comm:
    """The few operations the benchmark needs, on the same framework objects training uses."""

    def __init__(self, cfg: AllreduceConfig, env: DistEnv):
        import torch

        self.framework, self.env, self.torch = cfg.framework, env, torch
        self.fw = frameworks.make(cfg, env)  # type: ignore[arg-type]  # a RankConfig with the same fields
        if cfg.framework == "horovod":
            import horovod

            self.hvd = hvd = self.fw.hvd  # type: ignore[attr-defined]
            controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "unknown"
            ops = [f"{k}={v}" for k, v in os.environ.items() if k in ("HOROVOD_CPU_OPERATIONS", "HOROVOD_GPU_OPERATIONS")]
            self.describe = f"horovod {horovod.__version__} controller={controller} {' '.join(ops)}"
        else:
            import torch.distributed as dist

            self.dist = dist
            self.describe = f"torch.distributed backend={dist.get_backend()}"

    def inplace(self, t: Any) -> None:
        if self.framework == "horovod":
            self.hvd.allreduce_(t, op=self.hvd.Sum)
        else:
            self.dist.all_reduce(t)

    def out_of_place(self, src: Any, dst: Any) -> Any:
        if self.framework == "horovod":
            return self.hvd.allreduce(src, op=self.hvd.Sum)
        dst.copy_(src)
        self.dist.all_reduce(dst)
        return dst

    def reduce(self, value: float, op: str) -> float:
        t = self.torch.tensor([value], dtype=self.torch.float64)
        if self.framework == "horovod":
            return float(self.hvd.allreduce(t, op=self.hvd.Max if op == "max" else self.hvd.Sum)[0])
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


def _pattern(torch: Any, rank: int, count: int, dtype: Any) -> Any:
    return (torch.arange(4, dtype=torch.int64).add_(rank).remainder_(4).add_(1)).to(dtype).repeat(count // 4 + 1)[:count]


def _count_wrong(torch: Any, t: Any, world: int) -> int:
    expected = sum(_pattern(torch, r, 4, torch.float64) for r in range(world)).to(t.dtype)
    got = t.reshape(-1)
    n4 = got.numel() // 4 * 4
    wrong = int((got[:n4].view(-1, 4) != expected).sum()) if n4 else 0
    return wrong + int((got[n4:] != expected[: got.numel() - n4]).sum())


def measure(comm: Comm, cfg: AllreduceConfig, device: Any, sync: Any) -> list[tuple[int, int, Measured, Measured]]:
    """(size, count, out-of-place, in-place) for every size."""
    torch = comm.torch
    dtype = getattr(torch, cfg.dtype)
    elsize = torch.empty(0, dtype=dtype).element_size()
    top = max(1, cfg.max_bytes // elsize)
    buf = torch.zeros(top, dtype=dtype, device=device)
    out = torch.zeros(top, dtype=dtype, device=device) if comm.framework != "horovod" else None
    world = comm.env.world_size
    rows = []
    for size in sizes(cfg.min_bytes, cfg.max_bytes, cfg.step_factor):
        count = max(1, size // elsize)
        src, dst = buf[:count], (out[:count] if out is not None else None)
        results = []
        for kind in ("out-of-place", "in-place"):
            src.zero_()

            def op() -> Any:
                return comm.inplace(src) if kind == "in-place" else comm.out_of_place(src, dst)  # noqa: B023

            for _ in range(cfg.warmup_iters):
                op()
            comm.reduce(0.0, "sum")  # every rank starts the timed loop together
            sync()
            t0 = time.perf_counter()
            for _ in range(cfg.iters):
                op()
            sync()
            mine = (time.perf_counter() - t0) / cfg.iters
            src.copy_(_pattern(torch, comm.env.rank, count, dtype))
            res = op()
            sync()
            checked = src if kind == "in-place" else res
            wrong = comm.reduce(float(_count_wrong(torch, checked.cpu(), world)), "sum")
            results.append(Measured(comm.reduce(mine, "max") * 1e6, int(wrong)))
        rows.append((count * elsize, count, results[0], results[1]))
    return rows


def _time_str(us: float) -> str:
    # nccl-tests' precision steps, so that its parsers read ours.
    return f"{us:7.0f}" if us >= 10000 else (f"{us:7.1f}" if us >= 100 else f"{us:7.2f}")


def format_table(cfg: AllreduceConfig, world: int, ranks: list[dict[str, Any]],
                 rows: list[tuple[int, int, Measured, Measured]], describe: str) -> str:
    """The output of nccl-tests' all_reduce_perf, line for line, for our measurement."""
    typ = NCCL_TYPE[cfg.dtype]
    lines = [(f"# nThread 1 nGpus 1 minBytes {cfg.min_bytes} maxBytes {cfg.max_bytes} step: {cfg.step_factor}(factor) "
              f"warmup iters: {cfg.warmup_iters} iters: {cfg.iters} agg iters: 1 validation: 1 graph: 0"),
             f"# hpcbench allreduce: {describe}, device {cfg.device}, {world} ranks",
             "#", "# Using devices"]
    for r in ranks:
        lines.append(f"#  Rank {r['rank']:2d} Group  0 Pid {r['pid']:6d} on {r['host']:>10s} device "
                     f"{r['local_rank']:2d} [0x{r['bus']:02x}] {r['device']}")
    lines += ["#",
              "#                                                              out-of-place                       in-place          ",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "]
    bws = []
    for size, count, oop, ip in rows:
        line = f"{size:12d}  {count:12d}  {typ:>8s}  {'sum':>6s}  {-1:6d}"
        for m in (oop, ip):
            alg = algbw(size, m.time_us)
            bws.append(alg * bus_factor(world))
            line += f"  {_time_str(m.time_us)}  {alg:6.2f}  {bws[-1]:6.2f}  {m.wrong:5d}"
        lines.append(line)
    wrong = sum(m.wrong for _, _, a, b in rows for m in (a, b))
    lines += [f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}",
              f"# Avg bus bandwidth    : {sum(bws) / max(len(bws), 1):.6g} ", "#"]
    return "\n".join(lines) + "\n"


def to_rows(cfg: AllreduceConfig, world: int, rows: list[tuple[int, int, Measured, Measured]]) -> list[AllreduceRow]:
    out = []
    f = bus_factor(world)
    for size, count, oop, ip in rows:
        a, b = algbw(size, ip.time_us), algbw(size, oop.time_us)
        out.append(AllreduceRow(size_bytes=size, count=count, dtype=cfg.dtype, time_us=ip.time_us, algbw_gbps=a,
                                busbw_gbps=a * f, wrong=ip.wrong, oop_time_us=oop.time_us, oop_algbw_gbps=b,
                                oop_busbw_gbps=b * f, oop_wrong=oop.wrong))
    return out


def run(cfg: AllreduceConfig, env: DistEnv) -> ResultRecord | None:
    import torch

    paths = PointPaths(Path(cfg.out))
    prov = provenance.start(paths.provenance(env.rank), env.rank, env.local_rank)
    require(cfg.framework, cfg.backend, cfg.device)
    torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
    cuda = cfg.device == "cuda"
    device, sync, index = placement.use_device(cfg.device, env.local_rank)
    prov.add("gpu_binding", lambda: placement.pairing(env.rank, env.local_rank, os.sched_getaffinity(0),
                                                      placement.gpu_of(index), f"device is {cfg.device}"))

    started = utcnow()
    comm = Comm(cfg, env)
    try:
        rows = measure(comm, cfg, device, sync)
        doc = prov.finish()
        me = rank_info(env)
        bus = torch.cuda.get_device_properties(index).pci_bus_id if cuda else 0
        dev = {"rank": env.rank, "local_rank": env.local_rank, "pid": me.pid, "bus": bus,
               "host": me.slurm_node or me.hostname, "device": torch.cuda.get_device_name() if cuda else "cpu"}
        keep = ("rank", "hostname", "slurm_node", "affinity", "gpu_binding")
        gathered = comm.gather((me, dev, {k: doc.get(k) for k in keep}))
    finally:
        comm.close()
    if env.rank != 0:
        return None
    gathered.sort(key=lambda g: g[0].rank)
    print(format_table(cfg, env.world_size, [g[1] for g in gathered], rows, comm.describe), end="", flush=True)
    ar = to_rows(cfg, env.world_size, rows)
    ok, detail = affinity.affinity_summary([g[2] for g in gathered])
    gpu_numa_ok, gpu_numa_detail = placement.pairing_summary([g[2]["gpu_binding"] for g in gathered])
    top = ar[-1]
    rec = ResultRecord(
        point_id=cfg.point_id, label=cfg.label, framework=cfg.framework, backend=cfg.backend, model="allreduce",
        device=cfg.device, batch_size=0, nodes=env.nnodes, ranks_per_node=env.world_size // max(env.nnodes, 1),
        world_size=env.world_size, warmup_steps=cfg.warmup_iters, steps=cfg.iters, step_times_s=[],
        mean_step_time_s=top.time_us * 1e-6, throughput=top.busbw_gbps,
        throughput_per_rank=top.busbw_gbps / env.world_size, ranks=[g[0] for g in gathered], started_at=started,
        finished_at=utcnow(), job_id=env.job_id, measurement=f"{comm.describe}; {MEASUREMENT}", versions=versions(), kind="allreduce",
        allreduce=ar, affinity_ok=ok, affinity_detail=detail, gpu_numa_ok=gpu_numa_ok, gpu_numa_detail=gpu_numa_detail,
        provenance=[PointPaths(Path(cfg.out)).provenance(g[0].rank).name for g in gathered], params=params_seen(cfg),
    )
    atomic_write_json(paths.result, rec.to_dict())
    return rec


def main(argv: list[str] | None = None) -> int:
    def summary(rec: ResultRecord) -> str:
        wrong = sum(r.wrong + (r.oop_wrong or 0) for r in rec.allreduce)
        return (f"busbw {rec.throughput:.3f} GB/s at {rec.allreduce[-1].size_bytes} B, {wrong} wrong, "
                f"over {rec.world_size} ranks")

    return rank_main(AllreduceConfig.from_argv(argv), run, summary)


if __name__ == "__main__":
    sys.exit(main())
