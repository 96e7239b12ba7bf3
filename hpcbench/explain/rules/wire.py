"""Rules about the bytes on the wire: how much each node sent over which interface during the timed steps (the
ranks' interface counters, provenance ``wire``), how close that came to its link's peak, which node's link is the
slowest, and bytes that took another interface than the one the user named."""

from __future__ import annotations

from hpcbench.collectives import TABLE
from hpcbench.explain.context import Context
from hpcbench.explain.model import BYTES_PER_PARAM
from hpcbench.figures.wire import LOOPBACK, NodeWire, bytes_words, node_wires
from hpcbench.findings import Finding
from hpcbench.vocab import INFO, MODELS, WARNING

SLOWER = 0.8  # a node's link peak below this share of the fastest node's is "slower"
CONTENTION = 1.4  # an interface that sent this many times the point's own bytes carried someone else's too
SATURATED = 0.7  # a training point whose busiest link averaged this share of its peak over the timed steps


def _evidence(w: NodeWire) -> str:
    return f"provenance-rank{w.rank}.json wire ({w.what}), link_declared"


def _traffic(w: NodeWire, share_only: bool = False) -> str:
    share = f"{w.share:.0%} of the {w.peak.words()} link" if w.peak and w.share is not None else \
        "its link's peak unknown"
    if share_only:
        return share
    return (f"{bytes_words(w.sent)} over {w.interface} at {bytes_words(w.rate)}/s ({bytes_words(w.per_step)} per "
            f"step), {share}")


def traffic(ctx: Context) -> list[Finding]:
    """The traffic of the busiest link: what the timed steps moved, and how close it came to the link's rate."""
    wires = [w for w in node_wires(ctx.provenance) if w.interface != LOOPBACK]
    if len(wires) < 2:
        return []
    top = max(wires, key=lambda w: (w.share or 0.0, w.rate))
    peaks = [w for w in wires if w.peak]
    fastest = max((w.peak.bits_per_second for w in peaks if w.peak), default=0.0)
    slow = [w for w in peaks if w.peak and w.peak.bits_per_second < SLOWER * fastest]
    if slow:
        worst = min(slow, key=lambda w: w.peak.bits_per_second if w.peak else 0.0)
        rest = [w for w in wires if w.node != worst.node]
        best = max((w.share or 0.0) for w in rest) if rest else 0.0
        return [Finding(WARNING, "slowest-link", f"{worst.node}'s link is the slowest: {_traffic(worst)}; the other "
                        f"nodes reached at most {best:.0%} of theirs ({', '.join(sorted({w.peak.words() for w in rest if w.peak}))})"
                        ": every step waits for it",
                        f"give {worst.node} its full link back (hpcbench minicluster restore {worst.node}), or leave "
                        f"it out of the job ([slurm] sbatch_args = [\"--exclude={worst.node}\"])",
                        _evidence(worst), f"{worst.node}'s link at {_traffic(worst, share_only=True)}", ctx.name)]
    if ctx.point.kind == "train" and top.share is not None and top.share >= SATURATED and top.peak:
        return [Finding(WARNING, "link-bound", f"the gradient exchange is bound by the link: {_traffic(top)} "
                        f"({top.node}, the busiest link; peak {top.peak.source}): the step waits for the bytes",
                        f"a faster link for {top.node} (on the minicluster: hpcbench minicluster restore {top.node}), "
                        f"or fewer bytes per second: a larger batch per rank ({ctx.key('batch_size')})",
                        _evidence(top), subject=ctx.name)]
    return [Finding(INFO, "wire", f"inter-node traffic: {_traffic(top)} ({top.node}, the busiest link"
                    f"{'; peak ' + top.peak.source if top.peak else ''})",
                    None if top.peak else f"declare the link's rate: {top.peak_why}", _evidence(top), subject=ctx.name)]


def elsewhere(ctx: Context) -> list[Finding]:
    """Bytes that took another interface than the one named (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, ...)."""
    wires = node_wires(ctx.provenance)
    # ranks of one node talk over loopback even when addressed at the node's eth0 (the kernel routes its own
    # addresses over lo): on one node, lo is where the bytes belong
    off = [w for w in wires if w.elsewhere and not (w.interface == LOOPBACK and len(wires) == 1)]
    if not off:
        return []
    w = off[0]
    return [Finding(WARNING, "wire-interface", f"{len(off)} node(s) sent their bytes over {w.interface}, not "
                    f"{w.meant} ({w.meant_by}): {bytes_words(w.sent)} over {w.interface} on {w.node}, "
                    f"{bytes_words(w.other.get(w.meant or '', 0))} over {w.meant}",
                    f"name the interface the traffic should take where the library reads it ({w.meant_by}), and "
                    f"check that {w.meant} exists on every node", _evidence(w), subject=ctx.name)]


def _expected(ctx: Context, w: NodeWire) -> tuple[float, str] | None:
    """The bytes a node's ranks send per step for this point alone (ring algorithms: what busbw counts), and what."""
    p = ctx.point
    n, per_node = p.world_size or 0, p.ranks_per_node or 1
    if n < 2:
        return None
    if p.kind != "train" and w.size:
        c = TABLE.get(p.collective or "all_reduce")
        return (c.factor(n) * w.size * per_node, f"its {c.name} of {bytes_words(w.size)}") if c else None
    info = MODELS.get(p.model or "")
    if p.kind == "train" and info is not None:
        grads = info.params * BYTES_PER_PARAM
        return 2 * (n - 1) / n * grads * per_node, f"the allreduce of {bytes_words(grads)} of gradients"
    return None


def contention(ctx: Context) -> list[Finding]:
    """An interface that sent far more than the point's own traffic: another job shared the node and its link."""
    for w in node_wires(ctx.provenance):
        exp = _expected(ctx, w) if w.interface != LOOPBACK else None
        if exp is None or exp[0] <= 0 or w.per_step < CONTENTION * exp[0]:
            continue
        return [Finding(WARNING, "contention", f"{w.node}'s {w.interface} sent {bytes_words(w.per_step)} per step, "
                        f"{w.per_step / exp[0]:.1f}x {exp[1]} ({bytes_words(exp[0])}): other traffic shared the link "
                        "during the timed steps, so the figures are not this point's alone",
                        "run the point alone on its nodes: [slurm] sbatch_args = [\"--exclusive\"]", _evidence(w),
                        subject=ctx.name)]
    return []


RULES = (traffic, elsewhere, contention)
# a link that is the slowest, or that the steps kept near its peak, is what a large comm share waits for
EXPLAINS = {"slowest-link": ("comm-share", "model-gap", "noisy-steps"), "link-bound": ("comm-share", "model-gap")}
ORDER = 25  # after where the ranks ran: what crossed the links
