"""hunt.json (hpcbench.hunt/1): what a hunt measured and concluded, and the exclusion a run takes from it.

``--exclude-nodes`` of sweep and resubmit reads ``@hunt.json`` (its excluded nodes, each with the evidence)
or a Slurm host list; the run records the result as excluded.json beside its plan.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcbench.errors import ConfigError, NoSuchFile, SchemaError
from hpcbench.files import atomic_write_json, utcnow
from hpcbench.hunt.decide import Suspect
from hpcbench.hunt.run import Hunt
from hpcbench.workloads.distenv import expand_hostlist

SCHEMA = "hpcbench.hunt/1"
EXCLUDED_SCHEMA = "hpcbench.excluded/1"


def to_json(h: Hunt) -> dict[str, Any]:
    v = h.verdict
    return {
        "schema": SCHEMA, "created": utcnow(), "job_id": h.allocation.job_id, "nodes": list(h.allocation.nodes),
        "healthy": v.healthy, "excluded": list(v.excluded),
        "suspects": [asdict(s) for s in v.suspects],
        "spread": {"bandwidth_Bps": asdict(v.bandwidth), "latency_s": asdict(v.latency), "probe_s": asdict(v.probe)},
        "slow_pairs": [list(p) for p in v.slow_pairs],
        "rounds_used": h.rounds_used, "round_seconds": h.round_seconds, "seconds": h.seconds,
        "pairs": [{"a": t.a, "b": t.b, "round": t.round, "bandwidth_Bps": list(t.bandwidth),
                   "latency_s": list(t.latency)} for t in h.tests],
        "probes": [{"node": p.node, "seconds": list(p.seconds)} for p in h.probes],
        "failures": h.failures, "notes": h.notes,
        "settings": {k: v for k, v in asdict(h.settings).items() if k != "env"},
    }


def write(h: Hunt, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "hunt.json"
    atomic_write_json(path, to_json(h))
    return path


def read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise NoSuchFile(path, hint="give the hunt.json that `hpcbench hunt` wrote (its last line names it)")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SchemaError(f"{path}: not a hunt record ({e})", "give the hunt.json that `hpcbench hunt` wrote") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise SchemaError(f"{path}: schema {doc.get('schema') if isinstance(doc, dict) else None!r}, not {SCHEMA}",
                          "give the hunt.json that `hpcbench hunt` wrote")
    return doc


def suspects(doc: dict[str, Any]) -> list[Suspect]:
    return [Suspect(**s) for s in doc.get("suspects", [])]


@dataclass(frozen=True)
class Exclusion:
    nodes: tuple[str, ...]
    why: tuple[tuple[str, str], ...]  # (node, the evidence that put it out)
    source: str  # the hunt.json, or "command line"

    def to_json(self) -> dict[str, Any]:
        return {"schema": EXCLUDED_SCHEMA, "nodes": list(self.nodes), "why": dict(self.why), "source": self.source}

    def merged(self, other: Exclusion | None) -> Exclusion:
        if other is None:
            return self
        why = dict(other.why) | dict(self.why)
        return Exclusion(tuple(dict.fromkeys((*other.nodes, *self.nodes))), tuple(why.items()),
                         " + ".join(dict.fromkeys((other.source, self.source))))


def exclusion(arg: str) -> Exclusion:
    """``--exclude-nodes``: ``@hunt.json`` (its excluded nodes, each with the suspect's evidence) or a host list."""
    if arg.startswith("@"):
        path = Path(arg[1:]).resolve()
        doc = read(path)
        why: dict[str, str] = {}
        for s in suspects(doc):
            for node in filter(None, (s.node, s.partner)):
                why.setdefault(node, f"{s.kind}: {s.evidence}")
        return Exclusion(tuple(doc.get("excluded", [])), tuple(why.items()), str(path))
    nodes = tuple(expand_hostlist(arg.strip()))
    if not nodes or any(not n or n.startswith("-") for n in nodes):
        raise ConfigError(f"--exclude-nodes {arg!r}: not a host list", "give node names such as node[1-3],node7, "
                          "or @hunt.json")
    return Exclusion(nodes, tuple((n, "named on the command line") for n in nodes), "command line")


def read_exclusion(path: Path) -> Exclusion | None:
    """A run's excluded.json, or None when it has none."""
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    return Exclusion(tuple(doc.get("nodes", [])), tuple(doc.get("why", {}).items()), doc.get("source", ""))
