"""Reference values with tolerances, in ReFrame's style, keyed by (cluster, model, backend, nodes, ranks per node).

    [defaults]                  # tolerances used where a metric gives a bare value
    lower = -0.10               # relative: at most 10% below the reference
    upper = inf                 # no upper bound

    [[reference]]
    cluster = "minicluster"     # "*" (or leaving it out) matches any cluster
    model = "mlp"
    backend = "gloo"
    nodes = 2
    gpus_per_node = 2           # one rank per GPU; on a CPU run write ranks_per_node instead
    framework = "ddp"           # optional, narrows the match
    throughput = [12000.0, -0.2, inf]   # samples/s: [value, lower, upper], like ReFrame's (value, lower, upper)
    step_time_ms = 10.5                 # ms: bare value, tolerances from [defaults]

A measured value passes when value*(1+lower) <= measured <= value*(1+upper). A point a reference
names that failed to run fails; a reference that matches no point is reported as not measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcbench.errors import ConfigError, read_text
from hpcbench.figures.aggregate import Agg
from hpcbench.files import toml
from hpcbench.report.fmt import num
from hpcbench.tabular import Table

KEYS = ("cluster", "model", "backend", "nodes", "ranks_per_node", "gpus_per_node", "framework")
PER_NODE = ("ranks_per_node", "gpus_per_node")  # one of the two: ranks per node (one rank per GPU on GPUs)
METRICS = {"throughput": ("samples/s", lambda a: a.throughput),
           "step_time_ms": ("ms", lambda a: None if a.step_time_s is None else a.step_time_s * 1e3)}


@dataclass(frozen=True)
class Reference:
    where: str  # file: reference[N]
    match: dict[str, Any]
    metric: str
    value: float
    lower: float
    upper: float

    def matches(self, a: Agg) -> bool:
        m = self.match
        if m.get("cluster", "*") != "*" and m["cluster"] != a.cluster:
            return False
        got = {"model": a.model, "backend": a.backend, "nodes": a.nodes, "ranks_per_node": a.ranks_per_node,
               "framework": a.framework}
        return a.kind == "train" and all(m[k] == got[k] for k in got if k in m)

    def bounds(self) -> tuple[float, float]:
        return self.value * (1 + self.lower), self.value * (1 + self.upper)


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"{where}: expected a number, got {v!r}")
    return float(v)


def load(path: str | Path) -> list[Reference]:
    path = Path(path)
    doc = toml(read_text(path, "references file"), path)
    unknown = set(doc) - {"defaults", "reference"}
    if unknown:
        raise ConfigError(f"{path}: unknown table {min(unknown)!r} (valid: defaults, reference)")
    d = doc.get("defaults", {})
    lo, hi = _number(d.get("lower", -0.1), f"{path}: defaults.lower"), _number(d.get("upper", math.inf), f"{path}: defaults.upper")
    refs = []
    for i, entry in enumerate(doc.get("reference", [])):
        where = f"{path}: reference[{i}]"
        bad = set(entry) - set(KEYS) - set(METRICS)
        if bad:
            raise ConfigError(f"{where}: unknown key {min(bad)!r} (valid: {', '.join((*KEYS, *METRICS))})")
        missing = [k for k in ("model", "backend", "nodes") if k not in entry]
        if missing or sum(k in entry for k in PER_NODE) != 1:
            raise ConfigError(f"{where}: missing key {missing[0]!r}" if missing else
                              f"{where}: give one of ranks_per_node or gpus_per_node",
                              hint="a reference is keyed by (cluster, model, backend, nodes, ranks_per_node "
                                   "or gpus_per_node)")
        match = {k: entry[k] for k in KEYS if k in entry and k not in PER_NODE}
        match["ranks_per_node"] = entry.get("ranks_per_node", entry.get("gpus_per_node"))
        metrics = [m for m in METRICS if m in entry]
        if not metrics:
            raise ConfigError(f"{where}: no reference value (give {' or '.join(METRICS)})")
        for m in metrics:
            v = entry[m]
            if isinstance(v, list):
                if len(v) != 3:
                    raise ConfigError(f"{where}.{m}: expected [value, lower, upper], got {v!r}")
                value, lower, upper = (_number(x, f"{where}.{m}") for x in v)
            else:
                value, lower, upper = _number(v, f"{where}.{m}"), lo, hi
            if lower > 0 or upper < 0:
                raise ConfigError(f"{where}.{m}: lower must be <= 0 and upper >= 0 (relative tolerances)")
            refs.append(Reference(where, match, m, value, lower, upper))
    return refs


def check(refs: list[Reference], aggs: list[Agg]) -> tuple[Table, int]:
    """The pass/fail table and the number of failures (a regression makes summarize exit 1)."""
    rows, failures = [], 0
    for ref in refs:
        unit, read = METRICS[ref.metric]
        lo, hi = ref.bounds()
        key = "/".join(str(ref.match.get(k, "*")) for k in ("cluster", "model", "backend"))
        key += f" {ref.match['nodes']}×{ref.match['ranks_per_node']}"
        hits = [a for a in aggs if ref.matches(a)]
        span = f"[{num(lo)}, {num(hi) if math.isfinite(hi) else '∞'}]"
        if not hits:
            rows.append([key, ref.metric, f"{num(ref.value)} {unit}", span, "—", "not measured", ""])
        for a in hits:
            got = read(a) if a.ok else None
            verdict = "pass" if got is not None and lo <= got <= hi else "FAIL"
            failures += verdict != "pass"
            why = "" if got is not None else f"point {a.state}: {a.reason}"
            if got is not None and verdict != "pass":
                why = f"{(got / ref.value - 1) * 100:+.1f}% vs reference"
            rows.append([f"{key} ({a.label})", ref.metric, f"{num(ref.value)} {unit}", span, num(got), verdict, why])
    return Table("references", "References (value within [ref×(1+lower), ref×(1+upper)])",
                 ["point", "metric", "reference", "allowed", "measured", "verdict", "detail"], rows), failures
