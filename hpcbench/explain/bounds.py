"""The limits a point is measured against: the peak of the slowest link its traffic crosses (speed of
light), and the alpha-beta scaling model that says what its step time should be on the measured
allreduce curve. A gap between measured and modelled is itself a finding."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from hpcbench.explain import links, model
from hpcbench.explain.rules.wire import EXPLAINS as LINK_EXPLAINS
from hpcbench.explain.context import Context, synchronous_compute
from hpcbench.explain.inputs import Subject
from hpcbench.findings import Finding, ranked
from hpcbench.parse.checks import one_rank
from hpcbench.parse.evidence import Evidence
from hpcbench.vocab import INFO, MODELS, WARNING

GAP = 0.10  # measured efficiency this far below the model's is something the model does not explain
LINK_CAUSES = frozenset(LINK_EXPLAINS)  # the causes a link is: they take a comm share the model explains
Placement = tuple[str, str, int | None, int | None]  # framework, backend, nodes, ranks per node: a curve's key


LATENCY_MAX = 1 << 20  # a table that stops here measures latency: busbw climbs with size up to ~100s of MiB


def unjudged(point: Subject, evidence: Evidence) -> tuple[str, str] | None:
    """Why a communication point's busbw says nothing about a link: ('nothing' or 'latency-bound', the reason)."""
    rows = [r for r in point.rows if r.size_bytes > 0]
    alone = one_rank(evidence)
    if alone:
        return "nothing", (f"one rank ({alone.line}): nothing crosses a link, and nccl-tests' busbw of one rank "
                           "is 0 by definition")
    if not rows:
        return None
    if all(r.busbw_gbps == 0 for r in rows) and max(r.size_bytes for r in rows) > LATENCY_MAX:
        return "nothing", "busbw is 0.00 in every row: these figures measure nothing (a failed or misread run)"
    largest = max(r.size_bytes for r in rows)
    in_text = max((int(c.groups[0] or 0) for c in evidence.all("row")), default=0)  # rows read or not
    if largest <= LATENCY_MAX and in_text <= LATENCY_MAX:  # never a conclusion that a row not read would change
        return "latency-bound", (f"the table stops at {largest:,} bytes: messages this small are latency-bound, so "
                                 "busbw says nothing about the links")
    return None


def peak(ctx: Context) -> tuple[links.Peak | None, str]:
    """The peak of the slowest link a communication point's traffic crosses, or None and why (None and "" where
    the figures cannot be judged against any link: rule 'busbw' says why)."""
    p = ctx.point
    if p.kind == "collective" and unjudged(p, ctx.evidence):
        return None, ""
    hosts = ctx.hosts()
    spaces = {d.get("net_namespace") for d in ctx.provenance if d.get("net_namespace")}
    # ranks in several network namespaces (the minicluster's nodes) talk over a link even on one host
    inter = len(hosts) > 1 or len(spaces) > 1 or any(t.startswith("NET/") for t in ctx.transports("inter"))
    if p.device == "cpu" and not inter:
        return None, "all ranks on one host talk through loopback and shared memory: no link in the table"
    named = next((c.value() for c in ctx.evidence.all("instance")), None)
    if inter and named and links.instance(named):
        return links.instance(named), ""
    if inter:
        found, why = links.between_hosts(ctx.network(), ctx.provenance, p.ranks_per_node or 1)
        return (found, why) if found is not None else (_dumped_nic(ctx) or (None, why))
    nvls = any(n.get("nvls_used") for n in ctx.nccl)
    return links.within_host(ctx.gpu_models(), nvls, ctx.transports(), ctx.provenance)


def _dumped_nic(ctx: Context) -> tuple[links.Peak, str] | None:
    """The NIC speed NCCL's topology dump gives the network device a GPU uses (its 'NET[25.0]'), where nothing
    else names the link between hosts: NCCL's own rating of the port (topo.cc, from the plugin's speed)."""
    rated = [(r, d) for d in ctx.evidence.topology if (r := d.nic_speed())]
    if not rated:
        return None
    (gbps, net, line), dump = max(rated, key=lambda x: x[0][0])
    return links.Peak(gbps, f"{net} port (NCCL's topology dump)",
                      None, f"{dump.file}:{line} (NCCL topo.cc: the NET node's speed)"), ""


def gpu_bound(ctx: Context) -> links.Peak | None:
    """Where the link between hosts is not known, the GPU's own link (NVLink, Infinity Fabric) still bounds the
    busbw of a collective across hosts: an upper bound, not the peak (the report shows peaks only)."""
    gpus = ctx.gpu_models()
    return links.nvlink(min(gpus)) if gpus else None


def _curve(point: Subject) -> dict[int, float]:
    rows: dict[int, list[float]] = {}
    for r in point.rows:
        rows.setdefault(r.size_bytes, []).append(r.time_us)
    return {size: sum(v) / len(v) for size, v in rows.items()}


def fits(points: Sequence[Subject], allreduce_file: str | Path | None = None) -> dict[Placement | None, model.Fit]:
    """Allreduce curves fitted per (framework, backend, nodes, ranks per node); key None: --allreduce FILE."""
    out: dict[Placement | None, model.Fit] = {}
    for a in points:  # all_reduce only: the gradient exchange the model is about (other collectives never stand in)
        allreduce = a.collective in (None, "all_reduce")
        if a.kind != "train" and a.ok and allreduce and a.rows:
            f = model.fit(_curve(a), f"the run's allreduce point {a.label}")
            if f:
                out[(a.framework, a.backend, a.nodes, a.ranks_per_node)] = f
    if allreduce_file is not None:
        from hpcbench.parse import parse_file

        if not Path(allreduce_file).is_file():
            from hpcbench.errors import NoSuchFile

            raise NoSuchFile(allreduce_file, "allreduce log")

        tests = parse_file(allreduce_file).get("nccl_tests") or {}
        if tests.get("collective") not in (None, "all_reduce"):
            from hpcbench.errors import ConfigError

            raise ConfigError(f"{allreduce_file}: a {tests['collective']}_perf log, but the scaling model needs an "
                              "all_reduce curve", hint="give an all_reduce_perf log, or the job log of an hpcbench "
                              "all_reduce point")
        curve = {int(r["size"]): float(r.get("oop_time_us") or r["ip_time_us"]) for r in tests.get("rows") or []
                 if r.get("oop_time_us") or r.get("ip_time_us")}  # rccl-tests may print in-place only
        f = model.fit(curve, Path(allreduce_file).name)
        if f is None:
            from hpcbench.errors import ConfigError

            raise ConfigError(f"--allreduce {allreduce_file}: {len(curve)} message size(s) with a time; the model "
                              "fits latency and bandwidth, so it needs 2 or more",
                              "give an nccl-tests run over a range of sizes, e.g. all_reduce_perf -b 8 -e 1G -f 2")
        out[None] = f
    return out


def prediction(p: Subject, fitted: dict[Placement | None, model.Fit]
               ) -> tuple[model.Prediction | None, model.Fit | None, str]:
    """A training point's modelled step: (prediction, the curve it used, what is missing when there is none)."""
    fit = fitted.get((p.framework, p.backend, p.nodes, p.ranks_per_node)) or fitted.get(None)
    info = MODELS.get(p.model) if p.model is not None else None
    if fit is None:
        return None, None, ("an allreduce curve of the same framework, backend and placement (a kind = "
                            "\"collective\" all_reduce point with the same nodes x ranks, or give --allreduce FILE)")
    compute = synchronous_compute(p)  # what the step waits for, but not a straggler: that one is a finding of its own
    if compute is None:
        return None, fit, "the compute-only time (comm_split = true)"
    if info is None:
        return None, fit, f"the parameter count of model {p.model!r}"
    return model.predict(compute, info.params, p.framework, fit), fit, ""


def with_model(ctx: Context, fitted: dict[Placement | None, model.Fit], found: list[Finding]) -> list[Finding]:
    """``found`` and the model's findings. Where the model explains the step, the point's comm share is what its
    link's allreduce curve costs, not a symptom of the host's CPUs (load, shared cores, one host): it is its own
    cause, named first when it costs most (on the minicluster's shaped links, 'load' took the credit)."""
    mine, explained = _model(ctx, fitted, found)
    # a link cause (link-bound, slowest-link) found beside it still takes the comm share: it is what the curve met
    if not explained or any(f.rule in LINK_CAUSES and f.severity == WARNING for f in found):
        return found + mine
    held = [replace(f, own_cause=True, evidence=f"{f.evidence}; the model predicts the step from the allreduce curve")
            if f.rule == "comm-share" and f.severity == WARNING else f for f in found]
    return held + mine


def _model(ctx: Context, fitted: dict[Placement | None, model.Fit], others: list[Finding]
           ) -> tuple[list[Finding], bool]:
    """The model's findings about a training point, and whether it explains the measured step."""
    p = ctx.point
    if p.kind != "train" or not p.ok or p.world_size in (None, 1) or p.framework not in ("ddp", "horovod"):
        return [], False
    pred, fit, missing = prediction(p, fitted)
    if pred is None or fit is None:
        if p.point_id is None and len(ctx.others) == 1:  # one log someone else made: a model needs a study
            return [], False
        return [Finding(INFO, "model", f"no scaling model for this point: it needs {missing}", subject=ctx.name)], False
    text = f"model: step {pred.step_s * 1e3:.1f} ms (compute {pred.compute_s * 1e3:.1f} + exposed " \
           f"{pred.exposed_s * 1e3:.1f}) against {(p.step_time_s or 0.0) * 1e3:.1f} ms measured"
    evidence = f"{pred.describe(p.framework)}; curve: {fit.describe()}"
    if p.efficiency is None or not p.step_time_s:
        return [Finding(INFO, "model", text, evidence=evidence, subject=ctx.name)], False
    # efficiency is inversely proportional to the step time at a fixed point (weak or strong scaling alike),
    # so the model's efficiency is the measured one scaled by measured / modelled step
    eff_model = p.efficiency * p.step_time_s / pred.step_s
    gap = eff_model - p.efficiency
    claim = f"measured efficiency {p.efficiency:.0%}, model {eff_model:.0%}"
    if gap <= -GAP:  # faster than the curve allows: the exchange met a link the curve did not (a burst, a cache)
        return [Finding(INFO, "model", f"{claim}: the step is faster than the allreduce curve predicts ({text})",
                        evidence=evidence, subject=ctx.name)], False
    if gap < GAP:
        return [Finding(INFO, "model", f"{claim}: the link and the framework's grouping explain it ({text})",
                        evidence=evidence, subject=ctx.name)], True
    leads = [f.rule for f in ranked(others) if f.severity == WARNING and f.rule not in ("few-repeats",)]
    see = f"; see {', '.join(dict.fromkeys(leads))}" if leads else "; no other finding explains it"
    # with leads, the gap is ranked after them (they are its explanation); alone, it is the headline
    cost = (p.step_time_s - pred.step_s) / p.step_time_s if p.step_time_s > pred.step_s and not leads else None
    return [Finding(WARNING, "model-gap", f"{claim}: the model does not explain {gap * 100:.0f} points{see}",
                    "the findings above; else measure the allreduce curve of this placement (a sweep with "
                    f"{ctx.key('kind')} = \"collective\") to see where the model goes wrong",
                    evidence, f"{gap * 100:.0f} efficiency points", ctx.name, cost)], False
