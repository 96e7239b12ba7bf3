"""Bandwidth judged against the hardware the log names: the largest message's busbw against the peak of the
link it crosses (links.toml: the GPU of nccl-tests' Rank lines, the instance a plugin names, the NICs of the
provenance); figures that cannot be judged said as such (one rank, busbw 0 everywhere, a table of small
messages only); and a cliff, where a larger message is much slower per byte than a smaller one.
"""

from __future__ import annotations

from hpcbench.explain import bounds
from hpcbench.explain.context import Context
from hpcbench.findings import Finding
from hpcbench.records import AllreduceRow
from hpcbench.vocab import INFO, WARNING

PLAUSIBLE = 0.5  # of the link's peak (its practical figure where NVIDIA quotes one): below, the figure is low
CLIFF = 0.5  # busbw falling below this share of the next smaller size's
CLIFF_FROM = 64 << 10  # below this, busbw is latency and noise


def _rows(ctx: Context) -> list[AllreduceRow]:
    """One row per message size (the first printed), by size."""
    seen: dict[int, AllreduceRow] = {}
    for r in ctx.point.rows:
        if r.size_bytes > 0:
            seen.setdefault(r.size_bytes, r)
    return [seen[k] for k in sorted(seen)]


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} B"


def busbw(ctx: Context) -> list[Finding]:
    """Whether the figures are plausible for the hardware the log names, or why they cannot be judged."""
    p = ctx.point
    if p.kind != "collective":
        return []
    rows = _rows(ctx)
    why = bounds.unjudged(p, ctx.evidence)
    if why:
        return [Finding(INFO if why[0] == "latency-bound" else WARNING, "busbw", f"figures {why[0]}: {why[1]}",
                        "run nccl-tests from 8 B to at least 1 GiB (-b 8 -e 1G -f 2) on two or more GPUs",
                        subject=ctx.name)]
    if not rows:
        return []
    top = rows[-1]
    named = next((str(c.line) for c in ctx.evidence.all("rank_line")), None)  # the line that names the GPU
    peak, _why = bounds.peak(ctx)
    where = f"{top.busbw_gbps:g} GB/s busbw at {_size(top.size_bytes)}"
    bound = bounds.gpu_bound(ctx) if peak is None and len(ctx.hosts()) > 1 else None
    if bound is not None:  # only a bound: the figure is within it, or cannot be
        if top.busbw_gbps <= bound.gbps:
            return [Finding(INFO, "busbw", f"figures plausible: {where} is within the {bound.link} peak of "
                            f"{bound.gbps:g} GB/s, an upper bound; the log does not name the NICs, which bound it "
                            "between hosts", "add provenance (hpcbench's job scripts record the NICs) to judge it "
                            "against the network", "; ".join(x for x in (named, bound.source) if x), subject=ctx.name)]
        return [Finding(WARNING, "busbw", f"figures above the link: {where} exceeds even the {bound.link} peak of "
                        f"{bound.gbps:g} GB/s", "check which link the traffic really crosses",
                        "; ".join(x for x in (named, bound.source) if x), subject=ctx.name)]
    if peak is None:
        return []
    ref = peak.practical or peak.gbps
    share = top.busbw_gbps / ref
    if top.busbw_gbps > peak.gbps * 1.05:
        return [Finding(WARNING, "busbw", f"figures above the link: {where} exceeds the {peak.link} peak of "
                        f"{peak.gbps:g} GB/s", "check which link the traffic really crosses (NVLS and CollNet "
                        "reduce in the network, where busbw is not the wire's)",
                        "; ".join(x for x in (named, peak.source) if x), subject=ctx.name)]
    verdict = "plausible" if share >= PLAUSIBLE else "low"
    return [Finding(INFO if verdict == "plausible" else WARNING, "busbw",
                    f"figures {verdict}: {where} is {share:.0%} of the {peak.link} "
                    f"{'practical figure' if peak.practical else 'peak'} ({ref:g} GB/s)",
                    None if verdict == "plausible" else "look for what halves it: the transports NCCL used "
                    "(NCCL_DEBUG=INFO), P2P disabled, a PCIe link trained down, a shared NIC",
                    "; ".join(x for x in (named, peak.source) if x), subject=ctx.name)]


def cliff(ctx: Context) -> list[Finding]:
    """A larger message much slower per byte than the smaller one before it: a protocol or algorithm switch
    gone wrong, a buffer that no longer fits, or a link that fails over."""
    rows = [r for r in _rows(ctx) if r.size_bytes >= CLIFF_FROM]
    for a, b in zip(rows, rows[1:]):
        if a.busbw_gbps > 0 and b.busbw_gbps < CLIFF * a.busbw_gbps:
            return [Finding(WARNING, "bw-cliff", f"busbw falls from {a.busbw_gbps:g} GB/s at {_size(a.size_bytes)} "
                            f"to {b.busbw_gbps:g} GB/s at {_size(b.size_bytes)} (time {a.time_us:g} -> "
                            f"{b.time_us:g} us)", "rerun those sizes with NCCL_DEBUG_SUBSYS=TUNING (NCCL_DEBUG=INFO) "
                            "to see the algorithm and protocol chosen, and pin NCCL_ALGO/NCCL_PROTO to compare",
                            subject=ctx.name)]
    return []


RULES = (busbw, cliff)
ORDER = 30  # with the figures: what they can be compared with
