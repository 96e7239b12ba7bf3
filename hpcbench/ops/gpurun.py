"""Running ``hpcbench doctor --gpu``: the facts and measurements of gpunode.py and gpumeasure.py, judged by
gpu.py, in the order a person would read them; and the report's text and JSON (the same content).

A measurement that fails becomes a failed line with its reason; the rest still run.
"""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hpcbench.errors import NoGpu
from hpcbench.ops import gpu, gpumeasure, gpunode
from hpcbench.ops.gpu import LABEL, Check
from hpcbench.ops.gpunode import GpuId, PciPlace
from hpcbench.vocab import ERROR, INFO, OK, WARNING
from hpcbench.workloads.affinity import CpuTopology

T = TypeVar("T")


@dataclass
class Report:
    host: str
    gpus: list[GpuId]
    checks: list[Check] = field(default_factory=list)
    seconds: float | None = None

    @property
    def failed(self) -> bool:
        return any(c.severity == ERROR for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        counts = {LABEL[s]: sum(c.severity == s for c in self.checks) for s in (OK, WARNING, ERROR, INFO)}
        return {"schema": gpu.SCHEMA, "host": self.host, "seconds": self.seconds,
                "gpus": [g.__dict__ for g in self.gpus], "checks": [c.to_dict() for c in self.checks],
                "summary": counts, "limits": {k: v.__dict__ for k, v in gpu.LIMITS.items()}}


def node_checks(gpus: list[GpuId], sys_root: Path = Path("/sys")) -> tuple[list[Check], list[PciPlace]]:
    """What sysfs and NVML say, judged, before anything is measured: identity, pairing, PCIe link."""
    places = [gpunode.read_place(g.bus_id, sys_root) for g in gpus]
    pairs = gpunode.pairings(places, CpuTopology.read(sys_root))
    checks: list[Check] = []
    for g, place, p in zip(gpus, places, pairs):
        checks += gpu.identity(g, place)
        checks.append(gpu.pairing(p))
        checks.append(gpu.host_link(g, place)[0])
    return checks, places


def _guard(area: str, who: str | None, fn: Callable[[], T], out: list[Check]) -> T | None:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a measurement that breaks is a finding, and the others still run
        import traceback

        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        frame = traceback.extract_tb(e.__traceback__)[-1]
        out.append(Check(area, who, ERROR, f"{area} could not be measured: {type(e).__name__}: {first}",
                         evidence=f"{frame.filename}:{frame.lineno}",
                         fix="the message says what broke; --keep DIR keeps the training runs' logs"))
        return None


def run(sys_root: Path = Path("/sys"), train: bool = True, workdir: Path | None = None,
        echo: Callable[[str], None] | None = None) -> Report:
    """The whole check on this node's GPUs. Raises NoGpu (exit 2) when this Python sees none."""
    try:
        gpus = gpunode.nvml_gpus()
    except LookupError as e:
        raise NoGpu(f"doctor --gpu: no GPU here: {e}", hint="run it on a GPU node, e.g. srun --gpus=1 hpcbench "
                    "doctor --gpu") from None
    t0 = time.monotonic()
    report = Report(socket.gethostname(), gpus)
    checks, places = node_checks(gpus, sys_root)
    say = echo or (lambda _: None)
    for g in gpus:
        say(f"  (GPU {g.index}: copies, matrix products, device memory)")
        c: list[Check] = []
        links_ = _guard("h2d", str(g.index), lambda: gpumeasure.host_links(g.index), c)
        if links_:
            # The link is read again after the copies: an idle GPU may have lowered its speed.
            check, peak = gpu.host_link(g, gpunode.read_place(g.bus_id, sys_root))
            checks = [check if (x.area, x.gpu) == ("pcie", str(g.index)) else x for x in checks]
            c += gpu.copies(g, *links_, peak)
        comp = _guard("bf16", str(g.index), lambda: gpumeasure.compute(g.index), c)
        mem = _guard("memory", str(g.index), lambda: gpumeasure.device_memory(g.index), c)
        bf16, fp32 = comp if comp else (None, None)
        c += gpu.device_figures(g, bf16, fp32, mem)
        checks += c
    for link in gpunode.peer_links(gpus) if len(gpus) > 1 else []:
        measured = _guard("p2p", f"{link.a}-{link.b}", lambda: gpumeasure.peer_copy(link.a, link.b), checks)
        if measured:
            checks.append(gpu.peers(gpus, link, measured, places))
    if train:
        say("  (GPU 0: hpcbench's DDP workload against a bare loop, ResNet-50, NCCL_DEBUG=INFO)")
        with tempfile.TemporaryDirectory(prefix="hpcbench-doctor-") as tmp:
            where = workdir or Path(tmp)
            where.mkdir(parents=True, exist_ok=True)
            t = _guard("training", "0", lambda: gpumeasure.training(where), checks)
            if t:
                checks.append(gpu.training(t))
                checks += gpu.nccl(t.log, gpus, places=places)
    report.checks = _ordered(checks)
    report.seconds = round(time.monotonic() - t0, 1)
    return report


AREAS = ("identity", "pairing", "pcie", "h2d", "d2h", "bf16", "fp32", "memory", "p2p", "training", "nccl")


def _ordered(checks: list[Check]) -> list[Check]:
    """GPU by GPU in the order of AREAS, then pairs, then the node (stable within one key)."""
    def key(c: Check) -> tuple[int, str, int]:
        return (2 if c.gpu is None else 1 if "-" in c.gpu else 0, (c.gpu or "").zfill(8),
                AREAS.index(c.area) if c.area in AREAS else len(AREAS))
    return sorted(checks, key=key)


def format_text(report: Report) -> str:
    lines = [f"GPU node {report.host}: {len(report.gpus)} GPU(s)"
             + (f", checked in {report.seconds:.0f} s" if report.seconds is not None else "")]
    for c in report.checks:
        who = f"GPU {c.gpu}" if c.gpu is not None else "node"
        lim = f"  [{c.limit}]" if c.share is not None and c.limit else ""
        lines.append(f"{LABEL[c.severity]:5} {who} {c.area}: {c.claim}{lim}")
        # A judged figure's evidence is how it was measured (in the JSON); anything else not ok shows where.
        if c.evidence and c.severity in (WARNING, ERROR) and (c.share is None or c.severity == ERROR):
            lines.append(f"{'':8}evidence: {c.evidence}")
        if c.fix and c.severity in (WARNING, ERROR):
            lines.append(f"{'':8}fix: {c.fix}")
    n = report.to_dict()["summary"]
    lines.append(f"{n['ok']} ok, {n['warn']} warn, {n['fail']} fail, {n['info']} info")
    return "\n".join(lines) + "\n"
