"""Which links a point's traffic used: NCCL's, read from the point's own logs by hpcbench.parse; Gloo's and
Open MPI's, which print none, from the ranks' provenance (workloads/transport.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcbench.figures.aggregate import Agg
from hpcbench.findings import Finding, rank
from hpcbench.parse.checks import check_point
from hpcbench.parse.transport import describe
from hpcbench.report.fmt import clip
from hpcbench.tabular import Table


def _scoped(nccl: dict[str, Any], scope: str) -> set[str]:
    return {e["transport"] for e in nccl.get("edges") or [] if e.get("scope") == scope and e.get("transport")}


def transports(aggs: list[Agg]) -> tuple[Table, list[Finding]]:
    """The table, and every check finding (for the findings list and the exit code)."""
    rows, findings, cpu_quiet = [], [], []
    for a in aggs:
        parsed = [log.facts for log in a.logs()]
        said = describe(a.backend, a.first.provenance)
        if not parsed and said is None:
            continue
        ncc = [p["nccl"] for p in parsed if p.get("nccl")]
        found = check_point(parsed, a.first.provenance, a.device)
        findings += [f.about(a.label) for f in found]
        files = ", ".join(sorted({Path(p.get("file") or "?").name for p in parsed})) or "—"
        if not ncc and said is not None:  # Gloo and MPI print no NCCL lines: their ranks recorded the transport
            rows.append([a.label, "—", said.text, "—", "—", "—", _verdict(found) or "ok",
                         "provenance" + (f", {files}" if parsed else "")])
            continue
        if not ncc:
            if a.device == "cpu" and not found:  # recorded before provenance/2: one note, not a row each
                cpu_quiet.append(a.label)
                continue
            rows.append([a.label, "—", "—", "—", "—", "—", _verdict(found) or f"no NCCL lines ({a.backend})", files])
            continue
        version = next((n.get("version") for n in ncc if n.get("version")), None)
        network = next((n.get("network") for n in ncc if n.get("network")), None)
        everything = {t for n in ncc for t in n.get("transports") or []}
        intra = set().union(*(_scoped(n, "intra") for n in ncc))
        inter = set().union(*(_scoped(n, "inter") for n in ncc))
        if not intra and not inter and everything:  # no host map in the log: say what was used, unscoped
            intra = {t for t in everything if not t.startswith("NET/")}
            inter = everything - intra
        gdr = "yes" if any("GDRDMA" in t for t in everything) else ("no" if any(t.startswith("NET/") for t in everything) else "—")
        rows.append([a.label, version or "not shown", network or "not shown", ", ".join(sorted(intra)) or "—",
                     ", ".join(sorted(inter)) or "—", gdr, _verdict(found) or "ok", files])
    t = Table("transports", "Transports per point (NCCL's from the NCCL lines of its logs; Gloo's and Open MPI's "
              "from its ranks' provenance)",
              ["point", "NCCL", "network", "intra-node", "inter-node", "GDRDMA", "check", "logs"], rows,
              empty="no logs with NCCL lines" if cpu_quiet else "no logs to read")
    if cpu_quiet:
        t.notes.append(f"{len(cpu_quiet)} CPU point(s) have no NCCL lines, as expected (their backends do not use "
                       f"NCCL), and were run before provenance recorded Gloo's and MPI's transport (provenance/2): "
                       f"{', '.join(cpu_quiet[:6])}{' …' if len(cpu_quiet) > 6 else ''}")
    return t, findings


def _verdict(found: list[Finding]) -> str:
    if not found:
        return ""
    worst = min(found, key=rank)
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return clip(f"{worst.severity}: {worst.rule}: {worst.claim}", 70) + more
