"""Every fact of tests/data/logs/EXPECTED.json, for every file, extracted exactly.

'kind' is the corpus's category (which issue the paste came from), not a fact of the text: horovod_5
and nccl_roce-mpiprefix_03 are the same kind of content (mpirun-tagged NCCL init of a Horovod job) yet
are filed under different kinds, so it is not compared. 'collective' there is a prose note; we check
that our collective agrees with it (the name it starts with) instead.
"""

from __future__ import annotations

import json

import pytest
from conftest import DATA

from hpcbench.parse import parse_file

LOGS = DATA / "logs"
EXPECTED = json.loads((LOGS / "EXPECTED.json").read_text())["files"]


@pytest.fixture(scope="module")
def parsed():
    return {name: parse_file(LOGS / name) for name in EXPECTED}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_fact(parsed, name):
    exp, out = EXPECTED[name], parsed[name]
    n = out["nccl"] or {}
    got = {
        "nccl_version": n.get("version"),
        "network": n.get("network"),
        "network_source": n.get("network_source"),
        "transports": n.get("transports", []),
        "transports_raw": n.get("transports_raw", []),
        "hosts": out["hosts"],
        "num_hosts": len(out["hosts"]),
        "ib_link_layer": n.get("ib_link_layer"),
        "nvls_used": n.get("nvls_used", False),
        "collnet_used": n.get("collnet_used", False),
    }
    for key, value in got.items():
        assert value == exp[key], f"{name}: {key} = {value!r}, expected {exp[key]!r}"

    t, et = out["nccl_tests"], exp["nccltests"]
    if et is None:
        assert t is None, f"{name}: nccl-tests table found where there is none"
    else:
        assert t is not None
        rows = t["rows"]
        largest = max(rows, key=lambda r: r["size"]) if rows else None
        assert t["avg_busbw"] == et["avg_bus_bandwidth"]
        assert len(rows) == et["num_data_rows"]
        assert (largest and largest["size"]) == et["largest_size_bytes"]
        assert (largest and largest["oop_busbw"]) == et["largest_size_oop_busbw"]
        assert (largest and largest["ip_busbw"]) == et["largest_size_ip_busbw"]
        assert t["has_redop_column"] == et["has_redop_column"]
        assert t["has_root_column"] == et["has_root_column"]
        assert t["wrong_column"] == et["wrong_column"]
        note = et["collective"]
        if note.startswith("unknown"):
            assert t["collective"] is None
        else:
            assert note.startswith(t["collective"]), (t["collective"], note)

    h, eh = out["horovod"] or {}, exp["horovod"]
    if eh is None:
        assert out["horovod"] is None
    else:
        for key in sorted(set(eh) - {"rank_prefix"}):
            assert h.get(key) == eh[key], f"{name}: horovod {key} = {h.get(key)!r}, expected {eh[key]!r}"
        assert out["launcher_prefix"] == eh["rank_prefix"]


WITH_NCCL = sorted(n for n, e in EXPECTED.items() if e["nccl_version"] or e["network"] or e["transports"])


@pytest.mark.parametrize("name", WITH_NCCL)
def test_the_nccl_object_names_the_files_hosts(parsed, name):
    """The hosts of a file's NCCL lines are its hosts (the file-level list adds nccl-tests' Rank lines only)."""
    assert parsed[name]["nccl"] is not None, f"{name}: NCCL facts expected, no NCCL object"
    assert parsed[name]["nccl"]["hosts"] == parsed[name]["hosts"]


def test_no_file_of_the_corpus_gives_a_warning_of_its_own(parsed):
    assert {k: v["warnings"] for k, v in parsed.items() if v["warnings"]} == {}
