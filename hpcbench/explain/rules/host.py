"""Rules about where the ranks ran: binding, shared and oversubscribed cores, a host posing as several
nodes, a straggling rank, and an input pipeline that keeps the step waiting.

They read the ranks' provenance (affinity, the binding asked for) and the result record (per-rank
times, node loads, input wait); what a record of an older hpcbench lacks is said, never guessed.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from hpcbench.explain.context import Context, lag, typical_compute
from hpcbench.explain.inputs import Subject
from hpcbench.figures.inputs import hunt_said
from hpcbench.figures.wire import machines
from hpcbench.findings import Finding
from hpcbench.parse.evidence import mask_cpus
from hpcbench.records import NodeLoad
from hpcbench.vocab import INFO, WARNING

# a rank over STRAGGLER (context.py) is a straggler when the wait costs at least this share of the step (below it,
# a busy host's noise)
STRAGGLER_COST = 0.10
INPUT_BOUND = 0.10  # share of the step spent waiting for the batch
COMPUTE_GROWTH = 0.20  # compute per step this much above the 1-rank-per-node point's
MINOR = 0.02  # an effect below this share of the step is not worth a finding
# A rank that shares its CPUs (with its peers, or with a busy host's other work) can lag its peers by up to about
# SHARED_LAG times their compute (measured under the same sharing: a rank the scheduler put behind waits about one
# of their turns), plus a scheduler time slice per extra thread on its CPU (what a compute of a millisecond or less
# shows most). On the minicluster at 2-9 threads per CPU, lags of ranks nothing was injected into stayed within
# 1.2 times, or 3 ms on sub-millisecond steps; beyond that the lag is a cause of its own (a slow node, an injected
# slow_rank), never credited to the sharing, nor to a slow input whose own wait differs less.
SHARED_LAG = 1.5
SLICE_S = 0.003


def _cpu_list(cpus: list[int]) -> str:
    return ",".join(map(str, cpus[:8])) + ("…" if len(cpus) > 8 else "")


def binding(ctx: Context) -> list[Finding]:
    """A rank whose CPU affinity is not the binding its launcher was asked for (sched_getaffinity against
    SLURM_CPU_BIND* or OpenMPI's policy); also the ranks of a host that share too few CPUs, and NCCL setting a
    GPU's affinity elsewhere."""
    out = []
    bad = [d for d in ctx.provenance if (d.get("affinity") or {}).get("matches") is False]
    if bad:
        d = bad[0]
        out.append(Finding(WARNING, "binding", f"{len(bad)} rank(s) are not bound as asked: "
                           f"{d['affinity'].get('detail')}", f"set the binding in {ctx.key('cpu_bind')} and "
                           f"{ctx.key('cpus_per_task')} (srun --cpu-bind, mpirun --bind-to); a wrapper that calls "
                           "taskset or numactl overrides them", f"provenance-rank{d.get('rank', 0)}.json affinity",
                           subject=ctx.name))
    per_host = _per_host(ctx)
    return out + [f for host, docs in sorted(per_host.items()) for f in _shared(ctx, host, docs)] + \
        _nccl_affinity(ctx, per_host)


def _per_host(ctx: Context) -> dict[str, list[dict[str, Any]]]:
    per_host: dict[str, list[dict[str, Any]]] = {}
    for d in ctx.provenance:
        per_host.setdefault(str(d.get("hostname")), []).append(d)
    return per_host


def _threads(doc: dict[str, Any]) -> int:
    """A rank's compute threads: OMP_NUM_THREADS as its job set it (hpcbench sets it to cpus_per_task)."""
    env = doc.get("env") or {}
    value = str(env.get("OMP_NUM_THREADS") or env.get("SLURM_CPUS_PER_TASK") or "1")
    return int(value) if value.isdigit() else 1


def _sharing(docs: list[dict[str, Any]]) -> list[tuple[frozenset[int], list[dict[str, Any]], bool, int]]:
    """(CPU set, its ranks, whether they are unbound, their threads) for each set that ranks of one host
    share, unbound or with more threads than CPUs."""
    groups: dict[frozenset[int], list[dict[str, Any]]] = {}
    for d in docs:
        groups.setdefault(frozenset((d.get("affinity") or {}).get("cpus") or []), []).append(d)
    out = []
    for cpus, ranks in sorted(groups.items(), key=lambda kv: sorted(kv[0])):
        if len(ranks) < 2 or not cpus:
            continue
        unbound = all(str((d.get("affinity") or {}).get("requested") or "none").endswith("none") for d in ranks)
        threads = sum(_threads(d) for d in ranks)
        if unbound or threads > len(cpus):
            out.append((cpus, ranks, unbound, threads))
    return out


def _shared(ctx: Context, host: str, docs: list[dict[str, Any]]) -> list[Finding]:
    """Ranks of a host on one and the same CPU set: unbound, or with more threads than the set has CPUs
    (two Slurm nodes on one host each give their rank CPU 0). A socket binding that gives two ranks the
    two cores of their socket is by design, and silent."""
    out = []
    for cpus, ranks, unbound, threads in _sharing(docs):
        listed = _cpu_list(sorted(cpus))
        claim = (f"{len(ranks)} ranks on {host} are not bound: the kernel moves them between cores and sockets "
                 f"(all on CPUs {listed})") if unbound else \
            f"{len(ranks)} ranks on {host} run {threads} threads on the same {len(cpus)} CPU(s) ({listed})"
        fix = f"bind them: {ctx.key('cpu_bind')} = \"cores\" (or \"sockets\")" if unbound else \
            (f"give each rank its own cores: {ctx.key('cpu_bind')} = \"cores\" with {ctx.key('cpus_per_task')} "
             f"within the host's CPUs, or fewer {ctx.key('ranks_per_node')}; Slurm nodes that share one host each "
             "hand out the same CPUs")
        ratio = threads / len(cpus)
        out.append(Finding(WARNING, "shared-cores", claim, fix, "; ".join(
            f"provenance-rank{d.get('rank')}.json affinity" for d in ranks[:2]),
            None if unbound else f"{ratio:.1f} threads per CPU: about {1 - 1 / ratio:.0%} of the step waits for one",
            ctx.name, None if unbound else 1 - 1 / ratio))
    return out


def _nccl_affinity(ctx: Context, per_host: dict[str, list[dict[str, Any]]]) -> list[Finding]:
    """NCCL's 'Setting affinity for GPU n to MASK' against the mask the rank of that GPU runs with."""
    for seen in ctx.evidence.affinity:
        host, gpu, mask, line = seen.host, seen.gpu, seen.mask, seen.line
        doc = next((d for d in per_host.get(host, []) if d.get("local_rank") == gpu), None)
        cpus = set((doc or {}).get("affinity", {}).get("cpus") or [])
        if doc and cpus and not mask_cpus(mask) & cpus:
            return [Finding(WARNING, "nccl-affinity", f"NCCL sets GPU {gpu} on {host} to CPUs "
                            f"{_cpu_list(sorted(mask_cpus(mask)))}, but its rank runs on {_cpu_list(sorted(cpus))}: "
                            "the rank feeds its GPU across the socket link",
                            f"put each rank on its GPU's socket: {ctx.key('gpu_bind')}", str(line),
                            subject=ctx.name)]
    return []


def one_host(ctx: Context) -> list[Finding]:
    """A point that asked for several nodes but whose ranks ran on fewer distinct hosts (the minicluster, the
    local backend): not an inter-node measurement."""
    p = ctx.point
    if not p.one_host_posing:
        return []
    m = machines(ctx.provenance)
    if m is not None and m.one_host_many_namespaces:
        # the minicluster: one kernel (boot id), but each node its own network namespace and link
        shaped = all((d.get("link_declared") or {}).get("bits_per_second") for d in ctx.provenance)
        links = "the links are real and shaped" if shaped else "the links are real but unshaped (a veth moves " \
            "bytes as fast as the CPUs copy them)"
        nodes = len(next(iter(m.hosts.values())))
        own = _own_cpus(ctx.provenance)
        # nodes with CPUs of their own (the minicluster's cpusets) share the kernel and memory, not the cores: a
        # caveat then, not a cause of a slow step
        compute = f"each node has CPUs of its own ({own}); memory and the kernel are shared" if own else \
            "compute is shared"
        return [Finding(INFO if p.kind != "train" or own else WARNING, "one-host",
                        f"{nodes} nodes in separate network namespaces of one host: {links}; {compute}",
                        "compare compute scaling on distinct hosts; the links here are what this measures",
                        "provenance-rank*.json boot_id (one kernel), net_namespace (one per node) and affinity",
                        subject=ctx.name)]
    return [Finding(WARNING, "one-host", f"asked for {p.nodes} nodes, but its ranks ran on {len(p.hosts)} host "
                    f"({', '.join(p.hosts)}): they share its cores, memory and network stack, so this is not an "
                    "inter-node measurement",
                    "run on distinct hosts to measure between nodes (a real cluster, not the minicluster "
                    f"nor the local backend); on this one, keep {ctx.key('nodes')} = [1] and vary "
                    f"{ctx.key('ranks_per_node')}", "result.json ranks[].hostname", subject=ctx.name)]


def _own_cpus(prov: list[dict[str, Any]]) -> str:
    """'node1: 0; node2: 1' where every node's ranks ran on CPUs no other node's did, else ''."""
    by: dict[str, set[int]] = {}
    for d in prov:
        cpus = (d.get("affinity") or {}).get("cpus")
        if not cpus:
            return ""
        by.setdefault(str(d.get("slurm_node") or d.get("hostname")), set()).update(cpus)
    if len(by) < 2 or sum(len(c) for c in by.values()) != len(set().union(*by.values())):
        return ""
    return "; ".join(f"{n}: CPU {','.join(map(str, sorted(c)))}" for n, c in sorted(by.items()))


def _hosts(loads: list[NodeLoad], by_kernel: bool = False) -> dict[str, list[NodeLoad]]:
    """Node loads grouped by host: Slurm nodes that share a host (the minicluster) share its CPUs. ``by_kernel``:
    by boot id where recorded (by host name in records that do not say), since the load average is the kernel's,
    so the minicluster's nodes, each in its own namespaces and cpuset, all see one figure."""
    out: dict[str, list[NodeLoad]] = {}
    for n in loads:
        out.setdefault((n.kernel if by_kernel else None) or n.host, []).append(n)
    return out


def oversubscribed(ctx: Context) -> list[Finding]:
    """Ranks x cpus_per_task on a host (Slurm nodes sharing one host counted together) above its CPUs, from the
    record's node_load."""
    rec = ctx.record
    loads = list(getattr(rec, "node_load", None) or [])
    if rec is None:
        return []
    if not loads and rec.kind == "collective":
        return []  # the communication benchmark records no per-node CPU count: saying so on every such point is noise
    if not loads:
        return [Finding(INFO, "oversubscribed", "cannot tell whether the cores were oversubscribed: the record "
                        "has no per-node CPU count", "summarize a run made by this hpcbench (it records node_load)",
                        subject=ctx.name)]
    for host, nodes in sorted(_hosts(loads).items()):
        cpus = nodes[0].cpus
        want = sum((n.ranks or 0) * (n.cpus_per_task or 1) for n in nodes)
        if cpus and want > cpus:
            parts = " + ".join(f"{n.ranks} x {n.cpus_per_task or 1} on {n.slurm_node or host}" for n in nodes)
            return [Finding(WARNING, "oversubscribed", f"ranks x cpus_per_task on host {host} ask for {want} CPUs "
                            f"({parts}), and it has {cpus} ({nodes[0].cores or '?'} cores): "
                            f"{want / cpus:.1f}x oversubscribed", f"fewer {ctx.key('ranks_per_node')} or a smaller "
                            f"{ctx.key('cpus_per_task')}, so that ranks x cpus_per_task fits {cpus} CPUs"
                            + ("; the Slurm nodes here share one host's cores" if len(nodes) > 1 else ""),
                            "result.json node_load[]: host, cpus, ranks, cpus_per_task",
                            f"every step waits for CPU time: {want / cpus:.1f} threads per CPU, about "
                            f"{1 - cpus / want:.0%} of the step", ctx.name, 1 - cpus / want)]
    return []


def _same_work(a: Subject) -> tuple[object, ...]:
    return a.framework, a.backend, a.model, a.batch_size, a.device


def _one_per_node(points: Sequence[Subject]) -> dict[tuple[object, ...], list[Subject]]:
    """Measured points of one rank per node with a compute time, by what they computed."""
    out: dict[tuple[object, ...], list[Subject]] = {}
    for a in points:
        if a.ok and a.ranks_per_node == 1 and typical_compute(a):
            out.setdefault(_same_work(a), []).append(a)
    return out


def compute_growth(ctx: Context) -> list[Finding]:
    """Compute per step should not depend on how many ranks share a node; when it grows, they compete."""
    p = ctx.point
    mine = typical_compute(p)
    if mine is None or (p.ranks_per_node or 1) <= 1:
        return []
    peers = ctx.index("one-rank-per-node", _one_per_node).get(_same_work(p))
    if not peers:
        return []
    base = min(peers, key=lambda a: a.nodes or 0)
    theirs = typical_compute(base) or 0.0
    growth = mine / theirs - 1
    if growth < COMPUTE_GROWTH:
        return []
    cost = (mine - theirs) / p.step_time_s if p.step_time_s else None
    if cost is not None and cost < MINOR:
        return []  # grown, but too little of the step to matter
    return [Finding(WARNING, "compute-growth", f"compute per step is {mine * 1e3:.1f} ms at {p.ranks_per_node} "
                    f"ranks per node against {theirs * 1e3:.1f} ms at 1 ({growth:+.0%}): the ranks of a node "
                    "compete for its cores or memory bandwidth",
                    f"give each rank its own cores ({ctx.key('cpu_bind')} = \"cores\", {ctx.key('cpus_per_task')}) or "
                    f"run fewer {ctx.key('ranks_per_node')}",
                    f"the median rank's compute-only step (result.json rank_compute_s) of {p.label} and {base.label}",
                    f"about {cost:.0%} of the step" if cost else None, ctx.name, cost)]


# Threads a rank keeps runnable beside its compute threads: Horovod's background thread spins inside MPI (two
# Horovod-MPI ranks alone held the 1-minute load at 3.0 on their 2 CPUs); Horovod-Gloo's sleeps.
BACKGROUND_THREADS = {("horovod", "mpi"): 1}


def load(ctx: Context) -> list[Finding]:
    """A host whose 1-minute load, beyond this point's own ranks, exceeded its CPUs. The average lags by a
    minute, so a high figure before the steps alone may be the previous job (info); high after them as
    well, something ran beside this one (warning). The figure is the kernel's: weighed against the kernel's
    CPUs, less every rank of the point on it (node1's 1-CPU cpuset against a load that counts node2's rank
    too named 'load' on most 2-node points of the minicluster)."""
    for _, nodes in sorted(_hosts(list(getattr(ctx.record, "node_load", None) or []), by_kernel=True).items()):
        n = nodes[0]
        host = "+".join(sorted(x.slurm_node or x.host for x in nodes)) if n.kernel and len(nodes) > 1 else n.host
        cpus = n.kernel_cpus or n.cpus
        extra = BACKGROUND_THREADS.get((ctx.record.framework, ctx.record.backend), 0) if ctx.record else 0
        own = sum((x.ranks or 0) * ((x.cpus_per_task or 1) + extra) for x in nodes)
        if not cpus or not n.before or n.before[0] <= cpus or n.before[0] - own < 1.0:
            continue
        beside = n.after is not None and len(n.after) > 0 and n.after[0] - own >= max(1.0, 0.5 * cpus)
        after = f", {n.after[0]:.1f} after them" if n.after else ""
        claim = (f"host {host} was busy: 1-minute load {n.before[0]:.1f} on {cpus} CPUs when the steps started"
                 f"{after}, of which this point's ranks account for at most {own}"
                 + (f" (with {extra} background thread per rank)" if extra else ""))
        return [Finding(WARNING if beside else INFO, "load",
                        claim + (": something ran beside it" if beside else
                                 ": the load of the last minute, perhaps the job before this one"),
                        f"ask for whole nodes: {ctx.key('sbatch_args')} = [\"--exclusive\"], or look at what "
                        "runs there" if beside else
                        f"repeat the point ({ctx.key('repeats')} = 3) to see whether it matters",
                        "result.json node_load[].before/after", subject=ctx.name)]
    return []


def straggler(ctx: Context) -> list[Finding]:
    """The slowest rank against the others (context.lag), where it lags by STRAGGLER beyond the noise of the
    means and the wait costs STRAGGLER_COST of the step; an info line where only the noise hides it."""
    rec = ctx.record
    slow = lag(rec)
    if rec is None or slow is None or not slow.exceeds:
        return []
    worst, med, over, what = slow.rank, slow.others, slow.over, slow.what
    r = next((x for x in rec.ranks if x.rank == worst), None)
    where = f" on {r.slurm_node or r.hostname}" if r else ""
    cost = min(over / rec.mean_step_time_s, 1.0) if rec.mean_step_time_s else None
    if cost is not None and cost < STRAGGLER_COST:
        return []
    if slow.within_noise:
        return [Finding(INFO, "straggler", f"rank {worst}{where} takes {slow.time * 1e3:.1f} ms per {what}, the other "
                        f"ranks {med * 1e3:.1f} ms (median), but the gap is within the noise of their means "
                        f"(±{(slow.noise or 0.0) * 1e3:.1f} ms): not told apart", f"more {ctx.key('steps')} to tell",
                        f"result.json rank_{what}_s and its CI", subject=ctx.name)]
    shared = _threads_per_cpu(ctx, r.hostname if r else None, worst)
    waits = [t for t in (getattr(rec, "rank_input_s", None) or []) if t is not None]
    input_gap = (waits[worst] - statistics.median(waits) if len(waits) == len(rec.rank_compute_s or rec.rank_step_s)
                 else 0.0)
    explained = SHARED_LAG * med + SLICE_S * max(shared - 1.0, 0.0)  # what sharing its CPUs can explain
    alone = over > explained and over > 2 * input_gap  # more than sharing or its own input wait explain
    beyond = (f", more than sharing its CPUs ({shared:.1f} threads per CPU) explains" if alone and shared > 1.0
              else "")
    node = (r.slurm_node or r.hostname) if r else None
    return [Finding(WARNING, "straggler", f"rank {worst}{where} takes {slow.time * 1e3:.1f} ms per {what}, the "
                    f"other ranks {med * 1e3:.1f} ms (median): every step waits {over * 1e3:.1f} ms for it{beyond}"
                    + hunt_said(ctx.point.hunts, node),
                    f"remove an injected straggler ({ctx.key('slow_rank')} = -1) if the sweep has one; else find "
                    f"out whether {node or 'that node'} is slow: hpcbench hunt --nodes {_point_nodes(ctx, node)}, "
                    f"then keep it out: hpcbench sweep SWEEP --exclude-nodes @RUNS/hunt-.../hunt.json "
                    f"({ctx.key('exclude')} = [\"{node or 'NODE'}\"])",
                    f"result.json rank_{what}_s",
                    f"about {cost:.0%} of the step" if cost else None, ctx.name, cost, own_cause=alone)]


def _point_nodes(ctx: Context, node: str | None) -> str:
    """The nodes the point's ranks ran on (Slurm names), as `hpcbench hunt --nodes` takes them."""
    rec = ctx.record
    names = sorted({x.slurm_node for x in rec.ranks if x.slurm_node}) if rec is not None else []
    return ",".join(names) if len(names) > 1 else (node or "NODES")


def _threads_per_cpu(ctx: Context, host: str | None, rank: int) -> float:
    """The most threads per CPU the host of ``rank`` ran, as far as the evidence tells: the CPU set it shared
    with other ranks, its oversubscription, its 1-minute load (0 when nothing tells)."""
    out = 0.0
    docs = [d for d in ctx.provenance if host is None or str(d.get("hostname")) == host]
    for cpus, ranks, _, threads in _sharing(docs):
        if any(d.get("rank") == rank for d in ranks):
            out = max(out, threads / len(cpus))
    for h, nodes in _hosts(list(getattr(ctx.record, "node_load", None) or [])).items():
        if (host is not None and h != host) or not nodes[0].cpus:
            continue
        n_cpus = nodes[0].cpus
        want = sum((n.ranks or 0) * (n.cpus_per_task or 1) for n in nodes)
        loads = [x[0] for x in (nodes[0].before, nodes[0].after) if x]
        out = max(out, want / n_cpus, *(v / n_cpus for v in loads))
    return out


def gpu_numa(ctx: Context) -> list[Finding]:
    """A rank whose GPU hangs off another socket than its CPUs: every copy crosses the socket link."""
    rec = ctx.record
    ok = getattr(rec, "gpu_numa_ok", None)
    if ok is False and rec is not None:
        return [Finding(WARNING, "gpu-numa", f"a GPU is fed across the socket link: {rec.gpu_numa_detail}",
                        f"put each rank on its GPU's socket: {ctx.key('gpu_bind')} = \"block\" or \"closest\" "
                        "(docs/howto/site-profile.md, GPU binding)",
                        "provenance-rank<N>.json gpu_binding; result.json gpu_numa_detail", subject=ctx.name)]
    if ok is None and ctx.point.device == "cuda" and rec is not None:
        return [Finding(INFO, "gpu-numa", f"whether each GPU is on its rank's NUMA node is not known: "
                        f"{getattr(rec, 'gpu_numa_detail', None) or 'the record predates this check'}",
                        "make /sys/bus/pci/devices/<bus>/numa_node readable, or install nvidia-ml-py; then "
                        f"{ctx.key('gpu_bind')} applies",
                        subject=ctx.name)]
    return []


def input_pipeline(ctx: Context) -> list[Finding]:
    """A step that waits INPUT_BOUND or more of its time for its batch (input_fraction)."""
    share = getattr(ctx.record, "input_fraction", None)
    if share is None or share < INPUT_BOUND:
        return []
    return [Finding(WARNING, "input", f"each step waits {share:.0%} of its time for its batch: the input pipeline "
                    "cannot keep up", f"measure the rest on synthetic data ({ctx.key('data')} = \"synthetic\"), "
                    f"or put {ctx.key('data_dir')} on faster storage", "result.json input_fraction",
                    f"about {share:.0%} of the step", ctx.name, share)]


RULES = (binding, gpu_numa, one_host, oversubscribed, compute_growth, load, straggler, input_pipeline)
ORDER = 20  # then where the ranks ran
# The causal table's entries of these rules: what each cause can produce, credited to it where both are found.
_CPU_TIME = ("straggler", "compute-growth", "noisy-steps", "comm-share", "model-gap")  # what waiting for a CPU shows
EXPLAINS = {
    "oversubscribed": ("shared-cores", *_CPU_TIME),
    # the "nodes" share the host's cores (each Slurm node hands out the same CPUs) and talk over its loopback
    "one-host": ("shared-cores", *_CPU_TIME),
    "shared-cores": _CPU_TIME,
    "binding": _CPU_TIME,
    "load": _CPU_TIME,
    "straggler": ("comm-share", "noisy-steps", "model-gap"),  # the others wait for it at the gradient exchange
    "input": ("straggler", "noisy-steps", "comm-share", "model-gap"),
    "gpu-numa": ("compute-growth", "model-gap"),
    "nccl-affinity": ("compute-growth", "model-gap"),
}
