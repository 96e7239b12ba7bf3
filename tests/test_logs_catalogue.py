"""One test per shape of tests/data/catalogue.json: its format string, filled with its arguments and
printed after the prefix of its release, gives the facts the catalogue says it feeds, by the line path and
by the fast path; a shape that feeds none adds no fact."""

from __future__ import annotations

import re

import pytest
from catalogue_lines import BY_ID, render, shapes, text

from hpcbench.parse import fastpath, parse_file, scan

SHAPES = shapes()
FIELDS = ("id", "tool", "fact", "format", "since", "until", "source", "feeds", "printed_as", "args", "expect", "example", "notes")
NOTHING = {"version": None, "network": None, "network_source": None, "transports": [], "transports_raw": [], "nranks": None,
           "nvls_used": False, "collnet_used": False, "ib_link_layer": None, "ib_devices": [], "edges": [], "warnings": []}
# Lines of the same host around the shape's, so the fast path (forced on 2 KiB chunks) knows the host and
# reads the shape's lines only if it hands them on.
FILLER = "node1:1234:1290 [0] NCCL INFO cudaDriverVersion 12040\n" * 60


def field(doc: dict, path: str):
    for key in path.split("."):
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    return doc


def parsed(tmp_path, body: str, fast: bool, monkeypatch) -> dict:
    p = tmp_path / ("fast.log" if fast else "line.log")
    p.write_text(FILLER + body + FILLER if fast else body)
    with monkeypatch.context() as m:
        if fast:
            m.setattr(scan, "CHUNK", 2048)
            m.setattr(scan, "FAST_MIN", 0)
            m.setattr(fastpath, "nccl_dominated", lambda *a: True)
            m.setattr(fastpath, "OTHERS_MAX", 1.0)
        return parse_file(p)


@pytest.mark.parametrize("shape", SHAPES, ids=[s["id"] for s in SHAPES])
def test_each_shape_gives_its_facts(tmp_path, monkeypatch, shape):
    body = text(shape)
    if shape["printed_as"] != "prefix":
        assert render(shape).rstrip("\n").split("\n")[-1] in body
    for fast in (False, True):
        d = parsed(tmp_path, body, fast, monkeypatch)
        if shape["feeds"]:
            for path, want in shape["expect"].items():
                assert field(d, path) == want, f"{'fast' if fast else 'line'} path: {path}\n{body}"
        else:
            n = d["nccl"] or {}
            assert {k: n.get(k, v) for k, v in NOTHING.items()} == NOTHING, body
            assert d["nccl_tests"] is None and d["horovod"] is None and d["records"] == [], body
            assert d["hosts"] == (["node1"] if fast or "node1:" in body else []), body


def test_every_entry_is_complete_and_says_where_it_comes_from():
    assert len(SHAPES) == len(BY_ID) > 300
    for s in SHAPES:
        assert tuple(s)[:len(FIELDS)] == FIELDS or set(FIELDS) <= set(s), s["id"]
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[\w.()+-]+:[\w./+-]+:\d+", s["source"]), s["source"]
        assert s["feeds"] == sorted({".".join(k.split(".")[:2]) for k in s["expect"]}), s["id"]
        assert s["tool"] in ("nccl", "nccl-tests", "rccl-tests") and s["since"], s["id"]
        assert "factor =" not in s["format"] and "busBw" not in s["format"], s["id"]  # format strings only, no code


def test_the_catalogue_covers_every_kind_of_fact_the_issue_names():
    facts = {s["fact"] for s in SHAPES if s["feeds"]}
    assert facts >= {"version", "network", "ib-devices", "link-layer", "socket-devices", "channel-transport", "nvls", "collnet",
                     "init", "prefix", "warn", "header", "rank-line", "table-header", "row", "summary"}
    assert {s["tool"] for s in SHAPES if s["feeds"]} == {"nccl", "nccl-tests", "rccl-tests"}
