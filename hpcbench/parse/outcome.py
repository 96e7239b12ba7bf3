"""What a log says of how its job ended and of what parse could not read in it: failure lines (Horovod's,
torchrun's, mpirun's, NCCL's error codes), nccl-tests rows and NCCL transport lines the parse could not read, and
nccl-tests run without MPI. Rules of `hpcbench check` (checks.py); each finding names its line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hpcbench.findings import Finding
from hpcbench.parse.cuts import edge_cut
from hpcbench.parse.evidence import Clue, Evidence
from hpcbench.vocab import ERROR, WARNING

# Linux signals a failed worker's exit status names (128 + N from a shell and Horovod, -N from torchrun)
SIGNALS = {6: "SIGABRT: an abort, e.g. a failed assertion or an uncaught C++ exception", 9: "SIGKILL: killed, e.g. by "
           "the OOM killer or a scale-in", 11: "SIGSEGV: a segmentation fault", 15: "SIGTERM: asked to stop"}
_STATUS = re.compile(r"status code (\d+)|[Ee]xit code:?\s*(\d+)|exitcode\s*:\s*(-?\d+)|signal (\d+)")


def _signal(text: str) -> str:
    m = _STATUS.search(text)
    if not m:
        return ""
    code = int(next(g for g in m.groups() if g is not None))
    sig = code - 128 if code > 128 else -code if code < 0 else code if m.group(4) else 0
    return f" (signal {sig}, {SIGNALS[sig]})" if sig in SIGNALS else ""


def crash(ev: Evidence) -> list[Finding]:
    """A failure line. Elastic Horovod blacklists the host of a failed worker and goes on with the others: where
    iterations follow the last failure line, a worker failed and the job did not."""
    found = ev.all("crash")
    if not found:
        return []
    first = found[0]
    status = next((c for c in found if _STATUS.search(c.line.text)), first)
    why = _signal(status.line.text)
    after = [c for c in ev.all("iteration") if c.line.number > found[-1].line.number]
    dropped = [c for c in found if "blacklist" in c.line.text]
    if after and dropped:
        host = re.search(r"host:? ([\w.-]+)", dropped[0].line.text)
        return [Finding(WARNING, "crash", f"a worker failed ({status.line.text.strip().rstrip('.')[:80]}{why}) and elastic "
                        f"Horovod blacklisted its host{' ' + host.group(1) if host else ''}; the job went on with "
                        f"the others: {len(after)} iteration(s) after it (from line {after[0].line.number})",
                        "read that worker's own output for its cause (a scale-in that removes a host ends its "
                        "workers this way too); the figures after it are of fewer workers", str(first.line))]
    more = f" (and {len(found) - 1} more such lines)" if len(found) > 1 else ""
    return [Finding(ERROR, "crash", f"the job failed: {first.line.text.strip()[:160]}{more}{why}",
                    "read the lines before the first failure: its cause is there, later ranks fail because of it",
                    str(first.line))]


def rows_unread(parsed: dict[str, Any], ev: Evidence) -> list[Finding]:
    """nccl-tests data rows in the text that parse could not read: said with their line, never dropped."""
    tests = parsed.get("nccl_tests") or {}
    read = {r["size"] for r in tests.get("rows") or []}
    # A point's evidence holds every log of its job (.out and .err): only this file's rows are this parse's to read.
    name = Path(str(parsed.get("file") or "")).name
    missed = [c for c in ev.all("row") if (not name or c.line.file == name) and int(c.groups[0] or -1) not in read]
    if not missed:
        return []
    c = missed[0]
    lines = ", ".join(str(m.line.number) for m in missed[:5]) + (", ..." if len(missed) > 5 else "")
    return [Finding(WARNING, "could-not-read", f"could not read {len(missed)} nccl-tests row(s) (line {lines}; "
                    f"size {c.groups[0]} first): the figures leave them out, and nothing here rests on them",
                    "rerun with each process's output in its own file (e.g. srun -o %t.out): other output glued "
                    "into a row (a second process, an NCCL line) cuts it", str(c.line))]


def cut_edges(parsed: dict[str, Any], ev: Evidence) -> list[Clue]:
    """This file's transport lines cut before or inside their transport, which parse read no edge from."""
    nccl = parsed.get("nccl") or {}
    edges = {(e["channel"], e["src"], e["dst"]) for e in nccl.get("edges") or []}
    raw = nccl.get("transports_raw") or []
    name = Path(str(parsed.get("file") or "")).name

    def joined(c: Clue) -> bool:  # the scan joined a hard-wrapped line with the next: its whole transport was read
        tail = c.groups[3] or ""
        if "via " in tail:
            part = tail[tail.find("via ") + 4:].strip()
            return any(r.startswith(part) and r != part for r in raw)
        return (int(c.groups[0] or -1), int(c.groups[1] or -1), int(c.groups[2] or -1)) in edges

    return [c for c in ev.all("edge_line") if (not name or c.line.file == name) and edge_cut(c.groups[3])
            and not joined(c)]


def transports_unread(parsed: dict[str, Any], ev: Evidence) -> list[Finding]:
    """Transport lines cut before or inside their transport ('... -> 1[1] [send] via NET/IB/0/GDR'): said with
    their lines; parse read no edge from them (nccl.py), so no transport, host or GDR conclusion rests on them.
    A line the scan joined with the next one (a hard wrap) was read, and is not said."""
    missed = cut_edges(parsed, ev)
    if not missed:
        return []
    c = missed[0]
    lines = ", ".join(str(m.line.number) for m in missed[:5]) + (", ..." if len(missed) > 5 else "")
    return [Finding(WARNING, "could-not-read", f"could not read the transport of {len(missed)} transport line(s) "
                    f"(line {lines}; channel {c.groups[0]} {c.groups[1]} -> {c.groups[2]} first): the line is cut "
                    "before or inside it, so the transports, hosts and GPUDirect RDMA said here leave them out",
                    "attach the log as a file rather than a paste cut at the terminal's width (NCCL_DEBUG_FILE="
                    "nccl.%h.%p writes each process's lines whole)", str(c.line))]


def no_mpi_build(ev: Evidence) -> list[Finding]:
    """nccl-tests without MPI=1 run by mpirun: every process runs its own test, each as 'Rank 0' of a world of
    its own (nccl-tests README: multi-process runs need the MPI build), so its header repeats."""
    owners: dict[str, set[tuple[str | None, str | None]]] = {}
    for c in ev.all("rank_line"):
        owners.setdefault(c.groups[0] or "", set()).add((c.groups[1], c.groups[2]))
    twice = next((r for r, o in owners.items() if len(o) > 1), None)
    headers = ev.all("run_header")
    rows = [c.line.number for c in ev.all("row")]
    dup = next((b for a, b in zip(headers, headers[1:]) if a.line.text.strip() == b.line.text.strip()
                and not any(a.line.number < n < b.line.number for n in rows)), None)
    if twice is None and dup is None:
        return []
    why = (f"Rank {twice} is printed by {len(owners[twice])} processes" if twice is not None
           else f"the run header is printed again at line {dup.line.number if dup else '?'} before any row")
    where = str(dup.line) if dup else str(ev.all("rank_line")[0].line)
    return [Finding(WARNING, "no-mpi-build", f"{why}: each process ran its own single-process test, so the figures "
                    "are not one job across the ranks", "build nccl-tests with MPI=1 (make MPI=1 MPI_HOME=...) and "
                    "launch it with mpirun/srun", where)]
