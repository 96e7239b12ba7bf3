"""Does the harness slow training down? Prints figures; not a test.

    PYTHONPATH=. .venv/bin/python benchmarks/harness_overhead.py [--model mnist_cnn] [--batch 64]
        [--threads 1] [--steps 200] [--runs 5] [--framework none|ddp]

Runs hpcbench's training workload (one rank, ``python -m hpcbench.workloads.train``, exactly the
command a job runs) and a bare training loop with the same model, batch, optimizer and thread
count, each in a fresh process, interleaved (A B B A A B ...) so that drifting machine load hits both
alike. The bare loop times all its steps in one go (no per-step synchronisation or bookkeeping).
Reports the median throughput of each, the ratio hpcbench / bare (goal: >= 0.98), and the median
of the per-pair ratios (each pair ran back to back).

Then the same comparison in one process: the workload's own timed loop and step function against
the bare loop, on one model, in alternating blocks of 10 steps. On this VM a fresh process runs
+-13% faster or slower than the next one, and throughput drifts by as much within a process over a
few seconds, which swamps a 2% goal; fine alternation cancels both, so that figure is the precise one.

With ``--framework ddp`` both sides wrap the model in DDP over Gloo with one rank, so the ratio
isolates the harness, not DDP.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(threads: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI", "MASTER_"))}
    env.update(OMP_NUM_THREADS=str(threads), SLURM_CPUS_PER_TASK=str(threads), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()), PYTHONPATH=f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}")
    return env


def bare(args: argparse.Namespace) -> float:
    """The bare loop (hpcbench/workloads/bare.py) in a fresh process, as the workload runs in one."""
    out = subprocess.run([sys.executable, "-m", "hpcbench.workloads.bare", "--model", args.model, "--batch",
                          str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads",
                          str(args.threads), "--framework", args.framework, "--backend", "gloo"],
                         capture_output=True, text=True, env=_env(args.threads), cwd=REPO, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def harness(args: argparse.Namespace, tmp: Path, i: int) -> float:
    out = tmp / f"h{i}"
    argv = [sys.executable, "-m", "hpcbench.workloads.train", "--out", str(out), "--point-id", f"bench{i}",
            "--label", "bench", "--model", args.model, "--backend", "gloo", "--device", "cpu",
            "--batch-size", str(args.batch), "--steps", str(args.steps), "--warmup-steps", str(args.warmup),
            "--lr", "0.01", "--nodes", "1", "--ranks-per-node", "1", "--framework", args.framework]
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env(args.threads), cwd=REPO,
                          check=False)
    if proc.returncode:
        raise SystemExit(f"hpcbench workload failed:\n{proc.stderr[-2000:]}")
    return float(json.loads((out / "result.json").read_text())["throughput"])


def bookkeeping_us(n: int = 100_000) -> float:
    """The harness's own cost per timed step, in-process and insensitive to machine load: the timed
    loop of the workload (clock reads, sync call, list append, next batch) around an empty step."""
    import time

    from hpcbench.workloads.data import batches
    from hpcbench.workloads.models import MODELS
    from hpcbench.workloads.steps import timed_steps

    data = batches("synthetic", None, MODELS["mnist_cnn"], 1, 0, 1, "cpu")
    next(data)  # the generator imports torch and makes its batch on the first call: not a per-step cost
    t0 = time.perf_counter()
    timed_steps(0, n, lambda: next(data), lambda: None)
    return (time.perf_counter() - t0) / n * 1e6


def in_process(args: argparse.Namespace, block: int = 10) -> tuple[float, float, float]:
    """The workload's own timed loop (``timed_steps`` around ``train_step``, GPU sampler included)
    against a bare loop, in this one process, on the same model and optimizer, alternating blocks of
    ``block`` steps A B B A ... so that the machine's drift (+-15% over seconds here) hits both alike.
    Returns (throughput the workload would report, bare throughput, the workload's block-wall throughput,
    the median over adjacent block pairs of the reported / bare ratio: robust to a block hit by a spike)."""
    import time

    import torch

    from hpcbench.workloads.bare import bare_step
    from hpcbench.workloads.data import batches
    from hpcbench.workloads.gpumon import GpuSampler
    from hpcbench.workloads.models import MODELS, build_model
    from hpcbench.workloads.steps import timed_steps, train_step

    torch.set_num_threads(args.threads)
    info = MODELS[args.model]
    torch.manual_seed(0)
    model = build_model(args.model)
    if args.framework == "ddp":
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = batches("synthetic", None, info, args.batch, 0, 1, torch.device("cpu"))
    hpc = train_step(model, opt, data, info, loss_fn)
    x, y = next(batches("synthetic", None, info, args.batch, 0, 1, torch.device("cpu")))

    bare = bare_step(model, opt, loss_fn, info, x, y)
    for _ in range(args.warmup):
        bare()
    step_times: list[float] = []
    hpc_wall = bare_wall = 0.0
    pairs = []  # per adjacent pair of blocks: bare block time / the workload's timed steps of its block
    blocks = max(2, args.steps * args.runs // block)
    for i in range(blocks):
        first_hpc = i % 4 in (0, 3)  # A B B A
        for which in ((True, False) if first_hpc else (False, True)):
            t0 = time.perf_counter()
            if which:
                times = timed_steps(0, block, hpc, lambda: None, GpuSampler(False, 0))
                hpc_wall += time.perf_counter() - t0
                step_times += times
            else:
                for _ in range(block):
                    bare()
                bare_block = time.perf_counter() - t0
                bare_wall += bare_block
        pairs.append(bare_block / sum(times))
    n = blocks * block
    return (args.batch / statistics.fmean(step_times), args.batch * n / bare_wall, args.batch * n / hpc_wall,
            statistics.median(pairs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mnist_cnn")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--framework", choices=("none", "ddp"), default="none")
    args = ap.parse_args()
    h, b = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            # A B, then B A: whichever runs first in a pair must not be favoured systematically.
            if i % 2:
                b.append(bare(args))
                h.append(harness(args, Path(tmp), i))
            else:
                h.append(harness(args, Path(tmp), i))
                b.append(bare(args))
            print(f"run {i + 1}/{args.runs}: hpcbench {h[-1]:.1f} samples/s, bare loop {b[-1]:.1f} samples/s",
                  flush=True)
    mh, mb = statistics.median(h), statistics.median(b)
    print(f"model {args.model}, batch {args.batch}, {args.threads} thread(s), {args.steps} timed steps, "
          f"framework {args.framework}, {args.runs} interleaved runs each")
    print(f"median throughput: hpcbench {mh:.1f} samples/s, bare loop {mb:.1f} samples/s")
    print(f"ratio hpcbench / bare: {mh / mb:.3f} (goal >= 0.98)")
    # Each pair ran back to back, so its ratio is less exposed to slow drifts of the machine's load.
    pairs = statistics.median(x / y for x, y in zip(h, b))
    print(f"median of the {args.runs} paired ratios: {pairs:.3f}; "
          f"spread of the ratios: {min(x / y for x, y in zip(h, b)):.2f} to {max(x / y for x, y in zip(h, b)):.2f}")
    reported, bare_thr, walled, paired = in_process(args)
    print(f"in one process, {args.steps * args.runs} steps each in alternating blocks of 10 (ABBA): the workload's "
          f"timed loop reports {reported:.1f} samples/s ({walled:.1f} by its blocks' wall time), the bare loop "
          f"{bare_thr:.1f}; ratio {reported / bare_thr:.3f} ({walled / bare_thr:.3f} by wall time), "
          f"median of the block pairs' ratios {paired:.3f} (goal >= 0.98)")
    us = bookkeeping_us()
    print(f"harness bookkeeping per timed step: {us:.2f} us = {us * 1e-6 * mb / args.batch * 100:.4f}% "
          f"of a bare step ({args.batch / mb * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
