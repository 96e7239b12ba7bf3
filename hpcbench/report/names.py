"""How the report names points and curves: by what they are (framework, backend, model, network, hosts,
ranks), never by a file name unless nothing else tells two logs apart."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `hpcbench history` names points from its database's fields, without the figures
    from hpcbench.figures.aggregate import Agg


def network(a: Agg) -> str | None:
    """The network NCCL said it used, where a log shows it."""
    return next((log.facts["nccl"]["network"] for log in a.logs() if (log.facts.get("nccl") or {}).get("network")),
                None)


def unit(aggs: list[Agg]) -> str:
    """What a rank is: a GPU when any point ran on GPUs, else just a rank."""
    return "GPUs (ranks)" if any(a.device == "cuda" for a in aggs) else "ranks"


def placement(a: Agg) -> str:
    """'2 hosts × 4', '1 host (2 Slurm nodes) × 2', '? × 8'."""
    per = a.ranks_per_node if a.ranks_per_node is not None else "?"
    if a.one_host_posing:
        return f"1 host ({a.nodes} Slurm nodes) × {per}"
    if a.servers is None:
        return f"{a.world_size or '?'} ranks, hosts not shown"
    return f"{a.servers} host{'s' if a.servers != 1 else ''} × {per}"


def what(a: Agg) -> str:
    """framework-backend and model (the collective, for a communication benchmark)."""
    return describe(a.framework, a.backend, a.model, a.kind, a.collective)


def describe(framework: str | None, backend: str | None, model: str | None, kind: str | None,
             collective: str | None) -> str:
    """``what`` of a point's fields: an unknown one is '?' (the framework) or left out, never None."""
    if framework == "nccl-tests":
        return f"nccl-tests {collective or '?'}"
    fw = framework if framework not in ("?", None) else "?"
    backend = f"-{backend}" if backend not in ("?", None, "none") else ""
    model = f" {model}" if kind == "train" and model not in ("?", None) else ""
    return f"{fw}{backend}{model}"


def point_name(a: Agg, drop: str | None = None) -> str:
    """A point on a plot or in a legend: what ran, over which network, where, and what else tells it apart
    (but the axis ``drop``, where every point shown shares it)."""
    net = network(a)
    apart = ", ".join(p for p in a.apart.split(", ") if p and not p.startswith(f"{drop}=")) if drop else a.apart
    return f"{what(a)}, {placement(a)}" + (f", {net}" if net else "") + (f", {apart}" if apart else "")


def settings_column(heads: list[str], rows: list[list[Any]], points: list[Agg], at: int) -> None:
    """A "settings" column at ``at`` (the values that tell points apart beyond the other columns: steps=10,
    NCCL_ALGO=Ring), when any row has one; rows are ``points``' rows, in order."""
    if any(a.apart for a in points):
        heads.insert(at, "settings")
        for row, a in zip(rows, points):
            row.insert(at, a.apart or "—")


def names_apart(aggs: list[Agg], name: Any = point_name) -> dict[int, str]:
    """id(agg) -> its name; logs that the name does not tell apart get their file name added."""
    first = {id(a): name(a) for a in aggs}
    counts: dict[str, int] = {}
    for n in first.values():
        counts[n] = counts.get(n, 0) + 1
    return {k: (f"{n} [{a.label}]" if counts[n] > 1 and a.point_id is None else n)
            for a in aggs for k, n in [(id(a), first[id(a)])]}
