"""What this installation can run: torch.distributed backends, Horovod's build, GPUs.

``detect()`` imports torch and horovod.torch (seconds), so nothing calls it at module import time;
planning calls it only when a plan asks for a framework/backend whose presence it must check.
Every probe is guarded: a missing or broken piece gives ``None`` and a reason, never an exception.

The rule "can this point run here?" is ``plan.limits.unavailable``, over what ``detect()`` finds:
the planner asks it of the ranks' interpreter in a subprocess, each rank asks it of itself at start.
"""

from __future__ import annotations

import platform
from functools import lru_cache
from typing import Any

from hpcbench.plan.limits import Capabilities, unavailable

# What a broken or partial install raises on import or probe: missing modules, missing shared
# libraries (OSError), CUDA initialisation failures (RuntimeError), API drift (AttributeError).
PROBE_ERRORS = (ImportError, OSError, RuntimeError, AttributeError, ValueError, TypeError)


def _reason(e: BaseException) -> str:
    first = str(e).strip().splitlines()
    return f"{type(e).__name__}: {first[0]}" if first else type(e).__name__


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


def unavailable_here(framework: str, backend: str, device: str) -> str | None:
    """Why this node cannot run ``framework``/``backend``/``device`` (None if it can): what each rank asks at start."""
    return unavailable(framework, backend, device, detect(horovod=framework == "horovod"))
