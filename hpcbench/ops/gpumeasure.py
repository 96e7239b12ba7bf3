"""The measurements of ``hpcbench doctor --gpu``: copies, matrix products and a short training run, each a
figure with how it was taken. torch is imported inside each function; the arithmetic (bytes or FLOPs over
the median time of repeated calls) is kept apart in ``timed`` so that tests can drive it with a given clock.

Sizes are chosen so that the whole doctor ends in about two minutes on one GPU: most of it is the training
comparison's four short processes (ResNet-50 start-up dominates them).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COPY_BYTES = 256 << 20  # host <-> device: big enough to reach the link's plateau
D2D_BYTES = 1 << 30  # device memory: far beyond any L2
MATMUL_N = 8192  # 1.1 TFLOP per bf16 product
REPS, INNER = 5, 4  # timed repetitions, calls per repetition (one synchronisation per repetition)


@dataclass(frozen=True)
class Measure:
    figure: float  # GB/s or TFLOP/s
    unit: str
    how: str  # what was timed, in words


def timed(fn: Callable[[], Any], sync: Callable[[], Any], reps: int = REPS, inner: int = INNER, warmup: int = 1,
          clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Seconds per call of ``fn``: ``reps`` times, ``inner`` calls between two synchronisations."""
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(reps):
        t0 = clock()
        for _ in range(inner):
            fn()
        sync()
        out.append((clock() - t0) / inner)
    return out


def rate(amount: float, seconds: list[float], scale: float, unit: str, how: str) -> Measure:
    """``amount`` per call over the median seconds per call, in units of ``scale``."""
    t = statistics.median(seconds)
    return Measure(amount / t / scale, unit, f"{how}; median of {len(seconds)} timings")


def copy(dst: Any, src: Any, sync: Callable[[], Any], what: str, both: bool = False, **kw: Any) -> Measure:
    """GB/s of ``dst.copy_(src)``; ``both``: count bytes read and written (device memory)."""
    n = src.numel() * src.element_size()
    how = f"{what}, {n >> 20} MiB per copy" + (", bytes read + written" if both else "")
    return rate(n * (2 if both else 1), timed(lambda: dst.copy_(src, non_blocking=True), sync, **kw), 1e9, "GB/s", how)


def matmul(n: int, dtype: Any, device: Any, sync: Callable[[], Any], **kw: Any) -> Measure:
    """TFLOP/s of an n x n x n product (2 n^3 FLOPs) on random data."""
    import torch

    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    c = torch.empty(n, n, device=device, dtype=dtype)
    name = str(dtype).removeprefix("torch.")
    tf32 = "" if dtype != torch.float32 else f", TF32 {'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'}"
    return rate(2 * n ** 3, timed(lambda: torch.mm(a, b, out=c), sync, **kw), 1e12, "TFLOP/s",
                f"{n}x{n}x{n} {name} torch.mm{tf32}")


def host_links(index: int) -> tuple[Measure, Measure]:
    """Pinned host -> device and device -> host copies on GPU ``index``."""
    import torch

    dev = torch.device("cuda", index)
    host = torch.empty(COPY_BYTES, dtype=torch.uint8).pin_memory()
    gpu = torch.empty(COPY_BYTES, dtype=torch.uint8, device=dev)
    sync = lambda: torch.cuda.synchronize(dev)  # noqa: E731
    with torch.cuda.device(dev):  # the copies on this GPU's stream, whatever the current device is
        return copy(gpu, host, sync, "pinned host -> device"), copy(host, gpu, sync, "device -> pinned host")


def device_memory(index: int) -> Measure:
    """A device -> device copy of D2D_BYTES, counting bytes read and written (what the datasheet figure counts)."""
    import torch

    dev = torch.device("cuda", index)
    a = torch.empty(D2D_BYTES, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    with torch.cuda.device(dev):
        return copy(b, a, lambda: torch.cuda.synchronize(dev), "device -> device", both=True)


def compute(index: int) -> tuple[Measure, Measure]:
    """bf16 and fp32 products (fp32 as torch runs it by default: TF32 off)."""
    import torch

    dev = torch.device("cuda", index)
    sync = lambda: torch.cuda.synchronize(dev)  # noqa: E731
    with torch.cuda.device(dev):
        return (matmul(MATMUL_N, torch.bfloat16, dev, sync, inner=10),
                matmul(MATMUL_N, torch.float32, dev, sync, reps=3, inner=2))


def peer_copy(a: int, b: int) -> Measure:
    import torch

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=torch.device("cuda", a))
    dst = torch.empty(COPY_BYTES, dtype=torch.uint8, device=torch.device("cuda", b))

    def sync() -> None:
        torch.cuda.synchronize(a)
        torch.cuda.synchronize(b)
    return copy(dst, src, sync, f"GPU {a} -> GPU {b}")


# --- training: hpcbench's own workload against a bare loop, each in its own process -------------------------

@dataclass(frozen=True)
class Training:
    harness: list[float]  # samples/s of each workload run
    bare: list[float]  # samples/s of each bare run
    log: Path  # the first workload run's output (NCCL_DEBUG=INFO)
    how: str

    @property
    def ratio(self) -> float:
        return statistics.median(self.harness) / statistics.median(self.bare)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(threads: int) -> dict[str, str]:
    """The environment of one training process: no launcher's variables, a rendezvous of its own; the GPU is
    the first this process sees (CUDA_VISIBLE_DEVICES as given), as for local rank 0 of a job."""
    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI", "MASTER_"))}
    env.update(SLURM_CPUS_PER_TASK=str(threads), OMP_NUM_THREADS=str(threads), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()), NCCL_DEBUG="INFO",
               PYTHONPATH=os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p))
    return env


def training(workdir: Path, *, device: str = "cuda", backend: str = "nccl", model: str = "resnet50",
             batch: int = 64, steps: int = 50, warmup: int = 10, pairs: int = 2, threads: int = 4,
             timeout_s: float = 300) -> Training:
    """One DDP rank through ``python -m hpcbench.workloads.train`` (exactly what a job runs) against
    ``python -m hpcbench.workloads.bare``, in the order A B B A ... so that drift hits both alike."""
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()  # what the measurements before held goes back to the driver for these processes
    common = ["--model", model, "--device", device, "--backend", backend, "--framework", "ddp"]
    harness: list[float] = []
    bare: list[float] = []
    log = workdir / "train-1.log"
    for i in range(2 * pairs):
        env = _env(threads)
        if (i % 4) in (0, 3):
            out = workdir / f"point-{len(harness) + 1}"
            argv = [sys.executable, "-m", "hpcbench.workloads.train", "--out", str(out), "--point-id",
                    f"doctor{len(harness)}", "--label", "doctor", *common, "--batch-size", str(batch), "--steps",
                    str(steps), "--warmup-steps", str(warmup), "--nodes", "1", "--ranks-per-node", "1",
                    "--comm-split", "False"]
            path = workdir / f"train-{len(harness) + 1}.log"
            _run(argv, env, path, timeout_s)
            harness.append(float(json.loads((out / "result.json").read_text())["throughput"]))
        else:
            argv = [sys.executable, "-m", "hpcbench.workloads.bare", *common, "--batch", str(batch), "--steps",
                    str(steps), "--warmup", str(warmup), "--threads", str(threads)]
            path = workdir / f"bare-{len(bare) + 1}.log"
            bare.append(float(_run(argv, env, path, timeout_s).strip().splitlines()[-1]))
    how = (f"{model}, batch {batch}, synthetic data, DDP over {backend} on 1 {device} rank, {steps} timed steps after "
           f"{warmup}; {len(harness)} runs of hpcbench.workloads.train and {len(bare)} of hpcbench.workloads.bare, "
           "interleaved A B B A; ratio of the medians")
    return Training(harness, bare, log, how)


def _run(argv: list[str], env: dict[str, str], log: Path, timeout_s: float) -> str:
    """Run one process with its output in ``log``; its stdout back. Raises RuntimeError with the log's tail."""
    from hpcbench import proc

    ran = proc.run(argv, timeout=timeout_s, env=env)
    log.write_text(ran.stdout + ran.stderr)
    if not ran.ok:
        raise RuntimeError(f"{' '.join(argv[1:3])}: {ran.why()} (log: {log})")
    return ran.stdout
