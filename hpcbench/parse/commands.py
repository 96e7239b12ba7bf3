"""The work behind ``hpcbench parse`` and ``hpcbench check`` (hpcbench/cli keeps only the argument wiring)."""

from __future__ import annotations

import json
import sys
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcbench.errors import ConfigError, NoSuchFile, read_text
from hpcbench.parse.api import Log, parse_file, read_log
from hpcbench.parse.nccl import EDGE_FIELDS, EDGE_INTS
from hpcbench.vocab import ERROR, INFO, WARNING

if TYPE_CHECKING:  # imported where used: `hpcbench parse --format json` does without them (~3 ms of its start)
    from hpcbench.findings import Finding


def _check_paths(files: list[str]) -> None:
    # Fail before printing anything: a typo in the third name should not leave half a JSON array.
    for f in files:
        if not Path(f).exists():
            raise NoSuchFile(f)
        if Path(f).is_dir():
            raise ConfigError(f"{f}: is a directory", hint="give log files, e.g. DIR/*.out")


def _parse_all(files: list[str]) -> list[dict[str, Any]]:
    _check_paths(files)
    return [parse_file(f) for f in files]


def _summary_row(d: dict[str, Any]) -> list[str]:
    n = d["nccl"] or {}
    t = d["nccl_tests"] or {}
    h = d["horovod"] or {}
    return [
        d["file"], n.get("version") or "-", n.get("network") or "-", n.get("ib_link_layer") or "-",
        ",".join(n.get("transports") or []) or "-",
        str(len(d["hosts"])), str(len(n.get("edges") or [])),
        _tests_cell(t),
        "-" if not h else f"{h.get('total_img_sec')} img/s", _own_cell(d.get("hpcbench") or []),
        str(len(d["records"])), str(len(d["warnings"])),
    ]


def _own_cell(points: list[dict[str, Any]]) -> str:
    """hpcbench's summary lines in one cell: the first point's figure, and how many more."""
    if not points:
        return "-"
    p = points[0]
    first = f"{p['reason']}" if p["kind"] == "unsupported" else f"{p['throughput']} {p['unit']}"
    return first + (f" (+{len(points) - 1} more)" if len(points) > 1 else "")


def _tests_cell(t: dict[str, Any]) -> str:
    """nccl-tests in one cell: the collective, then what the table shows (never a printed None)."""
    if not t:
        return "-"
    largest = t.get("largest") or {}
    name = t.get("collective") or "collective ?"
    if not t.get("rows"):
        return f"{name}: no data rows"
    avg = t.get("avg_busbw")
    avg_text = f"avg busbw {avg}" if avg is not None else "no 'Avg bus bandwidth' line"
    return f"{name}: {len(t['rows'])} sizes, {avg_text}, largest size busbw {largest.get('oop_busbw', '-')}"


def _dumps(docs: list[dict[str, Any]]) -> str:
    """JSON indented by 1, but one edge per line: json's indenting encoder is pure Python, and on the
    10^4 edges of a 1024-rank job it takes longer than reading 100 MB of log takes the parser."""
    edges: dict[str, str] = {}
    slim = []
    for d in docs:
        n = d.get("nccl")
        if n and n.get("edges"):
            mark = f"\0edges{len(edges)}\0"  # no parsed text holds NUL (decode drops it)
            edges[json.dumps(mark)] = "[\n    " + _edges_json(n["edges"]) + "\n   ]"
            d = {**d, "nccl": {**n, "edges": mark}}
        slim.append(d)
    out = json.dumps(slim, indent=1)
    for mark, text in edges.items():
        out = out.replace(mark, text, 1)
    return out


class _Encoded(dict[Any, str]):
    """Each value's JSON, encoded on first use: an edge's strings are few (a job's transports and hosts)."""

    def __missing__(self, value: Any) -> str:
        text = self[value] = json.dumps(value)
        return text


def _edges_json(edges: list[dict[str, Any]]) -> str:
    """The edges as json.dumps writes each, joined by ",\n    ", from one format string (nccl.EDGE_FIELDS: ints,
    then texts, each text encoded once): 30% faster than the encoder on the dicts. Edges of another shape go
    through the encoder."""
    if list(edges[0]) != list(EDGE_FIELDS):
        listed = json.dumps(edges, check_circular=False)  # plain data, made by nccl.result
        return listed[1:-1].replace('}, {"', '},\n    {"')  # '}, {"' is found only between two edges
    line = "{" + ", ".join(f'"{k}": ' + ("%d" if k in EDGE_INTS else "%s") for k in EDGE_FIELDS) + "}"
    enc, fields = _Encoded(), itemgetter(*EDGE_FIELDS)
    # 3 ints, 4 texts: another count fails here, on any log with an edge (tests/test_logs_engines.py)
    return ",\n    ".join([line % (c, s, d, enc[t], enc[r], enc[h], enc[x]) for c, s, d, t, r, h, x in map(fields, edges)])


def parse_command(files: list[str], fmt: str) -> int:
    docs = _parse_all(files)
    if fmt == "json":
        print(_dumps(docs))
        return 0
    from hpcbench.tabular import format_table

    cols = ["file", "nccl", "network", "link", "transports", "hosts", "edges", "nccl-tests", "horovod", "hpcbench",
            "records", "warnings"]
    print(format_table([dict(zip(cols, _summary_row(d))) for d in docs], cols))
    for d in docs:
        for w in d["warnings"]:
            print(f"warning: {d['file']}: {w}")
    return 0


def _read_all(files: list[str]) -> list[Log]:
    _check_paths(files)
    return [read_log(f) for f in files]


def check_findings(logs: list[Log], prov: list[dict[str, Any]], gpu: bool) -> list[Finding]:
    """What ``hpcbench check`` prints about logs: each one's network verdict, its checks (with the lines that
    show them), and what could not be read in it."""
    from hpcbench.findings import Finding
    from hpcbench.parse.checks import check_parsed, verdict  # not for `hpcbench parse` (~4 ms of its start)

    findings: list[Finding] = []
    for log in logs:
        d = log.facts
        # every file gets its network verdict, a Socket-only log too
        findings.append(Finding(INFO, "network", verdict(d, prov or None, log.evidence), subject=d["file"]))
        findings += check_parsed(d, prov or None, gpu=gpu or None, evidence=log.evidence)
        # a launcher's failure lines alone are a failed job's output, recognised by rule 'crash'
        said = [w for w in d["warnings"] if not (w.startswith("nothing recognised") and log.evidence.all("crash"))]
        findings += [Finding(WARNING, "unparsable", w, subject=d["file"]) for w in said]
    return findings


def check_command(files: list[str], gpu: bool, provenance: list[str], fmt: str) -> int:
    prov = []
    for p in provenance:
        try:
            prov.append(json.loads(read_text(p, "provenance file")))
        except ValueError as e:
            raise ConfigError(f"{p}: not valid JSON ({e})") from None
    findings = check_findings(_read_all(files), prov, gpu)
    if fmt == "json":
        json.dump([f.to_dict() for f in findings], sys.stdout, indent=1)
        print()
    else:
        for f in findings:
            print(f"{f.severity}: {f.subject}: [{f.rule}] {f.claim}" + (f"\n  fix: {f.fix}" if f.fix else ""))
        n = {s: sum(f.severity == s for f in findings) for s in (ERROR, WARNING, INFO)}
        print(f"{len(files)} files checked: {n[ERROR]} errors, {n[WARNING]} warnings, {n[INFO]} notes")
    return 1 if any(f.fails for f in findings) else 0
