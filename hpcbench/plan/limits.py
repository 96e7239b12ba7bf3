"""Plan-time refusals: points that do not fit the cluster profile's limits, and points this
installation cannot run (DDP-mpi without an MPI torch, a Horovod build without the asked-for
operations, ...), so that nobody queues a job just to learn it.

What the installation can run is asked of the interpreter the ranks will run (``slurm.python``,
else this one) in a subprocess: the planner itself never imports torch, and what counts is the
ranks' environment. When that environment cannot be known here (``slurm.modules`` change it inside
the job, or the interpreter does not answer), nothing is refused and each rank checks at start
instead (``workloads.common.require``, the same rule), ending with an error record, never a hang.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from hpcbench import proc
from hpcbench.errors import ConfigError, MissingExtra
from hpcbench.plan.checks import time_seconds
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import SweepSpec
from hpcbench.vocab import FRAMEWORKS, HOROVOD_OPS, TORCH_BACKEND

# --- the cluster profile's limits ------------------------------------------------------------------------------


def violations(spec: SweepSpec, points: list[Point]) -> list[str]:
    """Why each point (or the sweep's time limit) does not fit the cluster; empty when all fit."""
    c = spec.cluster
    if c is None:
        return []
    out = []
    zipped_time = spec.matrix.where("time") is not None  # then each point says its own
    if c.max_time and time_seconds(spec.slurm.time) > time_seconds(c.max_time) and not zipped_time:
        out.append(f"slurm.time = {spec.slurm.time} exceeds max_time = {c.max_time}")
    for p in points:
        s = p.settings(spec.slurm)  # a point's own cpus_per_task and time, where its axes set them
        why = []
        if c.max_time and "time" in dict(p.job) and time_seconds(s.time) > time_seconds(c.max_time):
            why.append(f"time = {s.time} exceeds max_time = {c.max_time}")
        if c.max_nodes is not None and p.nodes > c.max_nodes:
            why.append(f"nodes = {p.nodes} exceeds max_nodes = {c.max_nodes}")
        if c.max_gpus_per_node is not None and p.gpus_per_node > c.max_gpus_per_node:
            why.append(f"gpus_per_node = {p.gpus_per_node} " + ("but the cluster has no GPUs" if c.max_gpus_per_node == 0
                       else f"exceeds max_gpus_per_node = {c.max_gpus_per_node}"))
        cpus = p.ranks_per_node * s.cpus_per_task
        if c.max_cpus_per_node is not None and cpus > c.max_cpus_per_node:
            why.append(f"ranks_per_node x cpus_per_task = {p.ranks_per_node} x {s.cpus_per_task} = {cpus} "
                       f"exceeds max_cpus_per_node = {c.max_cpus_per_node}")
        if why:
            out.append(f"point {p.label}: {'; '.join(why)}")
    return out


def check_cluster(spec: SweepSpec, points: list[Point]) -> None:
    """Refuse the sweep at plan time when any point does not fit its cluster profile."""
    bad = violations(spec, points)
    if bad and spec.cluster is not None:
        c = spec.cluster
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise ConfigError(f"{spec.path}: does not fit cluster {c.name!r} ({c.source}): {'; '.join(bad[:3])}{more}",
                          hint="narrow the [matrix], add an [[exclude]], or lower slurm.time")


# --- what an installation can run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Capabilities:
    """What one installation can run; ``workloads.capabilities.detect()`` fills it in (importing torch)."""

    python: str
    torch: str | None = None
    torchvision: str | None = None
    cuda_devices: int = 0  # GPUs torch can see on this node
    cuda_version: str | None = None  # the CUDA torch was built with
    # torch.distributed backend name -> available; "ccl" only with oneccl_bindings_for_pytorch
    dist_backends: dict[str, bool] = field(default_factory=dict)
    oneccl_bindings: str | None = None  # oneccl_bindings_for_pytorch version
    horovod: str | None = None
    horovod_build: dict[str, Any] = field(default_factory=dict)  # hvd.*_built(): mpi_built, nccl_built, ...
    horovod_controllers: tuple[str, ...] = ()  # mpi, gloo
    horovod_tensor_ops: tuple[str, ...] = ()  # mpi, gloo, nccl, ccl, ddl
    reasons: dict[str, str] = field(default_factory=dict)  # why a piece above is None/False/empty

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["horovod_controllers"] = list(self.horovod_controllers)
        d["horovod_tensor_ops"] = list(self.horovod_tensor_ops)
        return d

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Capabilities:
        return cls(**{**doc, "horovod_controllers": tuple(doc.get("horovod_controllers", ())),
                      "horovod_tensor_ops": tuple(doc.get("horovod_tensor_ops", ()))})


def unavailable(framework: str, backend: str, device: str, caps: Capabilities, devices: bool = True) -> str | None:
    """Why ``framework``/``backend``/``device`` cannot run with ``caps``, or None if it can: the one rule,
    at plan time (``devices=False``: a login node has no GPU, the compute nodes may) and in every rank."""
    why = _software(framework, backend, device, caps)
    if why is None and device == "cuda" and devices and caps.cuda_devices < 1:
        why = "device 'cuda': torch sees no GPU on this node"
    return why


def _software(framework: str, backend: str, device: str, caps: Capabilities) -> str | None:
    if caps.torch is None:
        return f"torch is not importable: {caps.reasons.get('torch')}"
    if device == "cuda" and caps.cuda_version is None:
        return "device 'cuda': this torch is built without CUDA"
    if framework == "none":
        return None  # one process, no communication library
    if framework == "ddp":
        return _ddp(backend, device, caps)
    if framework == "horovod":
        return _horovod(backend, device, caps)
    return f"unknown framework {framework!r} (choose from: {', '.join(FRAMEWORKS)})"


def _ddp(backend: str, device: str, caps: Capabilities) -> str | None:
    name = TORCH_BACKEND.get(backend)
    if name is None:
        return f"backend {backend!r} has no torch.distributed equivalent"
    if name == "nccl" and device != "cuda":
        return "backend 'nccl' needs device 'cuda' (NCCL has no CPU path)"
    if not caps.dist_backends.get(name):
        why = caps.reasons.get(f"dist.{name}") or caps.reasons.get("dist_backends") or "not available"
        hint = {"mpi": "; use gloo, or Horovod's mpi", "ccl": "; install the oneCCL bindings matching this torch"}
        return f"DDP backend {backend!r}: {why}{hint.get(name, '')}"
    return None


def _horovod(backend: str, device: str, caps: Capabilities) -> str | None:
    if caps.horovod is None:
        return f"horovod is not importable: {caps.reasons.get('horovod')}"
    if not caps.horovod_build:
        return f"horovod: {caps.reasons.get('horovod_build', 'no build flags')}"
    op = HOROVOD_OPS.get(backend)
    if op is None:
        return f"backend {backend!r} has no Horovod equivalent (choose from: {', '.join(HOROVOD_OPS)})"
    if op == "nccl" and device != "cuda":
        return "Horovod backend 'nccl' needs device 'cuda'"
    if not caps.horovod_controllers:
        return "horovod is built with neither the MPI nor the Gloo controller"
    if op not in caps.horovod_tensor_ops:
        have = ", ".join(caps.horovod_tensor_ops) or "none"
        return (f"Horovod backend {backend!r}: this horovod {caps.horovod} is built without {op} "
                f"({op}_built() is false; tensor operations built: {have})")
    return None


_PROBE = "import json; from hpcbench.workloads.capabilities import detect; print(json.dumps(detect().to_dict()))"


def needs_probe(p: Point) -> bool:
    """torch always has gloo and (CUDA builds) nccl: only these depend on how things were built."""
    return p.framework == "horovod" or (p.framework == "ddp" and p.backend in ("mpi", "oneccl"))


def probe(python: str, env: dict[str, str]) -> Capabilities | None:
    """What ``python`` can run, asked in a subprocess; None when it does not answer."""
    ran = proc.run([python, "-c", _PROBE], timeout=120, env=env)
    try:
        return Capabilities.from_dict(json.loads(ran.stdout.strip().splitlines()[-1])) if ran.ok else None
    except (ValueError, IndexError, TypeError):
        return None


_HAS_TORCH = "import importlib.util, sys; sys.exit(3 if importlib.util.find_spec('torch') is None else 0)"


def torch_missing(python: str, env: dict[str, str]) -> bool:
    """``python`` surely cannot import torch (a login node's core install); False where it cannot be told."""
    if python == sys.executable and "PYTHONPATH" not in env:
        return importlib.util.find_spec("torch") is None
    return proc.run([python, "-c", _HAS_TORCH], timeout=60, env=env).returncode == 3


def check_installation(spec: SweepSpec, points: list[Point], python: str, dry_run: bool = False) -> None:
    """Raise ConfigError naming the first point the ranks' installation cannot run, with the reason; MissingExtra
    when the ranks' interpreter has no torch at all (a dry run only writes scripts: it does not need torch here)."""
    if spec.slurm.modules:  # a module may bring torch, or another build of it: only the job can tell
        return
    # The job exports [slurm.env] (LD_LIBRARY_PATH for a oneCCL build, say): probe with it too.
    env = {**os.environ, **dict(spec.slurm.env)}
    if torch_missing(python, env):
        if dry_run:  # scripts to read: the login node need not hold torch
            return
        raise MissingExtra("torch", f"{spec.path}: the ranks run {python}"
                           + (" (this interpreter: slurm.python is not set)" if python == sys.executable else ""),
                           python)
    todo = [p for p in points if needs_probe(p)]
    if not todo:
        return
    caps = probe(python, env)
    if caps is None:
        return
    for p in todo:
        why = unavailable(p.framework, p.backend, p.device, caps, devices=False)
        if why:
            others = sum(1 for q in todo if q is not p and (q.framework, q.backend) == (p.framework, p.backend))
            more = f" (and {others} more points like it)" if others else ""
            raise ConfigError(f"{spec.path}: point {p.label}{more}: {why}",
                              hint=f"drop it with [[exclude]] framework = \"{p.framework}\", backend = "
                                   f"\"{p.backend}\"; check with: hpcbench env")


def check(spec: SweepSpec, points: list[Point], python: str, dry_run: bool = False) -> None:
    """Every plan-time refusal, before anything is written or submitted (a dry run's: only those of the plan)."""
    if not points:
        raise ConfigError(f"{spec.path}: the exclude entries remove every point of the matrix",
                          hint="loosen an [[exclude]] entry")
    check_cluster(spec, points)
    check_installation(spec, points, python, dry_run)
