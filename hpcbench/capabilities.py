"""What this installation can run: torch.distributed backends, Horovod's build, GPUs.

``detect()`` imports torch and horovod.torch (seconds), so nothing calls it at module import time;
planning calls it only when a plan asks for a framework/backend whose presence it must check.
Every probe is guarded: a missing or broken piece gives ``None`` and a reason, never an exception.

``unavailable(framework, backend, device)`` is the one rule for "can this point run here?", used
both at plan time (``devices=False``: a login node has no GPU, the compute nodes may) and by each
rank at start-up (``devices=True``).
"""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

# Sweep backend names -> the torch.distributed backend string and the Horovod tensor-op flag.
TORCH_BACKEND = {"gloo": "gloo", "nccl": "nccl", "mpi": "mpi", "oneccl": "ccl", "ucc": "ucc"}
HOROVOD_OPS = {"mpi": "mpi", "gloo": "gloo", "nccl": "nccl", "oneccl": "ccl"}
FRAMEWORKS = ("ddp", "horovod", "none")


# What a broken or partial install raises on import or probe: missing modules, missing shared
# libraries (OSError), CUDA initialisation failures (RuntimeError), API drift (AttributeError).
PROBE_ERRORS = (ImportError, OSError, RuntimeError, AttributeError, ValueError, TypeError)


def _reason(e: BaseException) -> str:
    first = str(e).strip().splitlines()
    return f"{type(e).__name__}: {first[0]}" if first else type(e).__name__


@dataclass(frozen=True)
class Capabilities:
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


def _torch_part(reasons: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        import torch
    except PROBE_ERRORS as e:
        reasons["torch"] = _reason(e)
        reasons["dist_backends"] = "torch is not importable"
        return out
    out["torch"] = str(torch.__version__)
    out["cuda_version"] = torch.version.cuda
    try:
        out["cuda_devices"] = int(torch.cuda.device_count())
    except PROBE_ERRORS as e:
        reasons["cuda_devices"] = _reason(e)
    if not out.get("cuda_devices"):
        reasons.setdefault("cuda_devices", "torch sees no CUDA device on this node"
                           if torch.version.cuda else "torch is built without CUDA")
    try:
        import torchvision

        out["torchvision"] = str(torchvision.__version__)
    except PROBE_ERRORS as e:
        reasons["torchvision"] = _reason(e)

    backends: dict[str, bool] = {}
    try:
        import torch.distributed as dist

        if not dist.is_available():
            reasons["dist_backends"] = "torch is built without torch.distributed"
        else:
            for name in ("gloo", "nccl", "mpi", "ucc"):
                probe = getattr(dist, f"is_{name}_available", None)
                backends[name] = bool(probe()) if probe else False
                if not backends[name]:
                    reasons[f"dist.{name}"] = (f"this torch has no is_{name}_available()" if probe is None
                                               else f"this torch is built without {name}")
    except PROBE_ERRORS as e:
        reasons["dist_backends"] = _reason(e)
    try:
        import oneccl_bindings_for_pytorch as ccl  # registers the "ccl" process-group backend

        out["oneccl_bindings"] = str(getattr(ccl, "__version__", "unknown"))
        backends["ccl"] = True
    except PROBE_ERRORS as e:
        backends["ccl"] = False
        reasons["dist.ccl"] = f"oneccl_bindings_for_pytorch is not importable ({_reason(e)})"
    out["dist_backends"] = backends
    return out


def _horovod_part(reasons: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        import horovod

        out["horovod"] = str(horovod.__version__)
    except PROBE_ERRORS as e:
        reasons["horovod"] = _reason(e)
        return out
    try:
        import horovod.torch as hvd
    except PROBE_ERRORS as e:
        reasons["horovod_build"] = f"horovod.torch is not importable ({_reason(e)})"
        return out
    build: dict[str, Any] = {}
    for name in ("mpi_built", "gloo_built", "nccl_built", "ccl_built", "ddl_built", "cuda_built", "rocm_built"):
        fn = getattr(hvd, name, None)
        try:
            # nccl_built() returns the NCCL version it was built with (0 = none); keep it, it is useful.
            build[name] = fn() if fn else None
        except PROBE_ERRORS as e:
            build[name] = None
            reasons[f"horovod_build.{name}"] = _reason(e)
    out["horovod_build"] = build
    out["horovod_controllers"] = tuple(c for c in ("mpi", "gloo") if build.get(f"{c}_built"))
    out["horovod_tensor_ops"] = tuple(op for op in ("mpi", "gloo", "nccl", "ccl", "ddl") if build.get(f"{op}_built"))
    return out


@lru_cache(maxsize=2)
def detect(horovod: bool = True) -> Capabilities:
    """Probe this installation once per process (imports torch, and horovod.torch unless ``horovod=False``)."""
    reasons: dict[str, str] = {}
    found = _torch_part(reasons)
    if horovod:
        found.update(_horovod_part(reasons))
    else:
        reasons["horovod"] = "not probed"
    return Capabilities(python=platform.python_version(), reasons=reasons, **found)


def unavailable(framework: str, backend: str, device: str, caps: Capabilities | None = None,
                devices: bool = True) -> str | None:
    """Why ``framework``/``backend``/``device`` cannot run with this installation, or None if it can.

    ``devices=False`` checks only the software (for plan time on a login node without GPUs).
    """
    caps = detect(horovod=framework == "horovod") if caps is None else caps
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
    if framework == "horovod":
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
    return f"unknown framework {framework!r} (choose from: {', '.join(FRAMEWORKS)})"
