"""Plan-time rejection of points this installation cannot run (DDP-mpi without an MPI torch, a
Horovod build without the asked-for operations, ...), so that nobody queues a job just to learn it.

The check asks the interpreter the ranks will run (``slurm.python``, else this one) in a
subprocess: the planner itself never imports torch, and what counts is the ranks' environment.
When that environment cannot be known here (``slurm.modules`` change it inside the job, or the
interpreter does not answer), nothing is rejected and the job checks at start instead
(``workloads.common.require``), ending with an error record, never a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from hpcbench.errors import ConfigError
from hpcbench.plan import Point
from hpcbench.spec import SweepSpec

_PROBE = "import json; from hpcbench.capabilities import detect; print(json.dumps(detect().to_dict()))"


def needs_probe(p: Point) -> bool:
    """torch always has gloo and (CUDA builds) nccl: only these depend on how things were built."""
    return p.framework == "horovod" or (p.framework == "ddp" and p.backend in ("mpi", "oneccl"))


def _capabilities(python: str, env: dict[str, str]) -> Any:
    from hpcbench.capabilities import Capabilities

    try:
        out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True,
                             env=env)
        doc = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    doc["horovod_controllers"] = tuple(doc.get("horovod_controllers", ()))
    doc["horovod_tensor_ops"] = tuple(doc.get("horovod_tensor_ops", ()))
    return Capabilities(**doc)


def check(spec: SweepSpec, points: list[Point], python: str) -> None:
    """Raise ConfigError naming the first point that cannot run, with the reason and what to do."""
    todo = [p for p in points if needs_probe(p)]
    if not todo or spec.slurm.modules:
        return
    # The job exports [slurm.env] (LD_LIBRARY_PATH for a oneCCL build, say): probe with it too.
    caps = _capabilities(python, {**os.environ, **dict(spec.slurm.env)})
    if caps is None:
        return
    from hpcbench.capabilities import unavailable

    for p in todo:
        why = unavailable(p.framework, p.backend, p.device, caps, devices=False)
        if why:
            others = sum(1 for q in todo if q is not p and (q.framework, q.backend) == (p.framework, p.backend))
            more = f" (and {others} more points like it)" if others else ""
            raise ConfigError(f"{spec.path}: point {p.label}{more}: {why}",
                              hint=f"drop it with [[exclude]] framework = \"{p.framework}\", backend = "
                                   f"\"{p.backend}\"; check with: hpcbench env")
