"""A scaling model checked against the runs: an allreduce curve fitted as t(s) = alpha + beta*s, the
model's gradient bytes reduced the way each framework groups them, and the part not hidden behind the
backward pass added to the measured compute time.

Assumptions, each said in the model's text:
- the gradients are float32: 4 bytes per parameter (vocab.MODELS gives the parameter counts);
- DDP reduces them in buckets: the first of 1 MiB, then 25 MiB each (torch's defaults);
- Horovod fuses them into buffers of up to 128 MiB and waits a cycle of 1 ms per buffer (its defaults);
- the reduction overlaps the backward pass, about 2/3 of the compute time (backward ~ 2 x forward),
  except the last bucket, which can only start when the backward pass ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DDP_FIRST_BUCKET = 1 << 20
DDP_BUCKET = 25 << 20
HOROVOD_FUSION = 128 << 20
HOROVOD_CYCLE_S = 1e-3
BACKWARD_SHARE = 2 / 3
BYTES_PER_PARAM = 4


@dataclass(frozen=True)
class Fit:
    alpha_s: float  # latency per operation
    beta_s_per_byte: float  # inverse bandwidth
    points: int
    source: str  # which curve: the run's allreduce point, or a log given with --allreduce

    def time(self, nbytes: float) -> float:
        return self.alpha_s + self.beta_s_per_byte * nbytes

    def describe(self) -> str:
        bw = 1 / self.beta_s_per_byte / 1e9 if self.beta_s_per_byte > 0 else math.inf
        return f"alpha {self.alpha_s * 1e6:.1f} us, 1/beta {bw:.3g} GB/s (algbw), from {self.points} sizes of {self.source}"


def fit(curve: dict[int, float], source: str) -> Fit | None:
    """Least squares of t = alpha + beta*s over the sizes, each weighted by 1/t^2 (relative error), so the
    small messages fix alpha and the large ones beta. ``curve``: size in bytes -> time in microseconds."""
    pts = [(float(s), t * 1e-6) for s, t in sorted(curve.items()) if s > 0 and t > 0]
    if len(pts) < 2:
        return None
    w = [1 / (t * t) for _, t in pts]
    sw = math.fsum(w)
    sx = math.fsum(wi * s for wi, (s, _) in zip(w, pts))
    sy = math.fsum(wi * t for wi, (_, t) in zip(w, pts))
    sxx = math.fsum(wi * s * s for wi, (s, _) in zip(w, pts))
    sxy = math.fsum(wi * s * t for wi, (s, t) in zip(w, pts))
    det = sw * sxx - sx * sx
    if det <= 0:
        return None
    beta = (sw * sxy - sx * sy) / det
    alpha = (sy - beta * sx) / sw
    return Fit(max(alpha, 0.0), max(beta, 0.0), len(pts), source)


def buckets(nbytes: int, framework: str) -> list[int]:
    """How the framework groups the gradient bytes into collective operations."""
    if framework == "horovod":
        return [min(HOROVOD_FUSION, nbytes - i) for i in range(0, nbytes, HOROVOD_FUSION)] or [0]
    out = [min(DDP_FIRST_BUCKET, nbytes)]
    rest = nbytes - out[0]
    out += [min(DDP_BUCKET, rest - i) for i in range(0, rest, DDP_BUCKET)]
    return out


@dataclass(frozen=True)
class Prediction:
    step_s: float
    compute_s: float  # the compute-only step it started from
    comm_s: float  # all the reduction time
    exposed_s: float  # the part not hidden behind the backward pass
    buckets: int
    nbytes: int

    def describe(self, framework: str) -> str:
        grouping = (f"{self.buckets} fusion buffer(s) (Horovod: up to 128 MiB, a 1 ms cycle each)"
                    if framework == "horovod" else f"{self.buckets} bucket(s) (DDP: the first of 1 MiB, then 25 MiB)")
        return (f"{self.nbytes / 2**20:.1f} MiB of float32 gradients in {grouping}: reduction "
                f"{self.comm_s * 1e3:.2f} ms, of which {self.exposed_s * 1e3:.2f} ms not hidden behind backward")


def predict(compute_s: float, params: int, framework: str, curve: Fit) -> Prediction:
    nbytes = params * BYTES_PER_PARAM
    parts = buckets(nbytes, framework)
    per_op = [curve.time(b) + (HOROVOD_CYCLE_S if framework == "horovod" else 0.0) for b in parts]
    comm = math.fsum(per_op)
    hidden = min(comm - per_op[-1], BACKWARD_SHARE * compute_s)  # the last bucket waits for backward's end
    exposed = comm - max(hidden, 0.0)
    return Prediction(compute_s + exposed, compute_s, comm, exposed, len(parts), nbytes)
