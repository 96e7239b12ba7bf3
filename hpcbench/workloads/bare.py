"""A bare training loop: the yardstick the workload harness is held to (goal: >= 0.98 of its throughput).

    python -m hpcbench.workloads.bare --model resnet50 --batch 64 --steps 30 --warmup 10 \
        --framework ddp --backend nccl --device cuda

The same model, synthetic batch, optimizer and (with --framework ddp) one-rank DDP over the same backend as
``python -m hpcbench.workloads.train``, but none of its bookkeeping: all timed steps run in one go, with
one device synchronisation after the warm-up and one at the end. Prints the throughput, samples/s, as the
last line. Used by ``hpcbench doctor --gpu`` and benchmarks/harness_overhead.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any


def bare_step(model: Any, opt: Any, loss_fn: Any, info: Any, x: Any, y: Any) -> Callable[[], None]:
    """One step on one fixed batch: no timing, no bookkeeping (the in-process comparison uses it too)."""
    def step() -> None:
        opt.zero_grad()
        out = model(x)
        if info.tokens:
            loss_fn(out.reshape(-1, info.num_classes), y.reshape(-1)).backward()
        else:
            loss_fn(out, y).backward()
        opt.step()
    return step


def throughput(model_name: str, batch: int, steps: int, warmup: int, framework: str = "none",
               backend: str = "gloo", device: str = "cpu", threads: int = 1) -> float:
    """Samples per second of ``steps`` bare steps, after ``warmup`` untimed ones."""
    import torch

    from hpcbench.vocab import MODELS, TORCH_BACKEND
    from hpcbench.workloads.data import batches
    from hpcbench.workloads.models import build_model

    torch.set_num_threads(threads)
    info = MODELS[model_name]
    dev = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")
    sync: Callable[[], Any] = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    torch.manual_seed(0)
    model = build_model(model_name).to(dev)
    if framework == "ddp":
        import torch.distributed as dist

        port = os.environ.get("MASTER_PORT", "29500")
        dist.init_process_group(TORCH_BACKEND[backend], init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if device == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = next(batches("synthetic", None, info, batch, 0, 1, dev))
    step = bare_step(model, opt, torch.nn.CrossEntropyLoss(), info, x, y)
    for _ in range(warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    thr = batch * steps / (time.perf_counter() - t0)
    if framework == "ddp":
        torch.distributed.destroy_process_group()
    return thr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hpcbench.workloads.bare", description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
    ap.add_argument("--framework", choices=("none", "ddp"), default="none")
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    a = ap.parse_args(argv)
    print(throughput(a.model, a.batch, a.steps, a.warmup, a.framework, a.backend, a.device, a.threads), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
