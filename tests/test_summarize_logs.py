"""summarize on logs of jobs hpcbench did not launch: the development corpus' Horovod, nccl-tests and DDP logs."""
from __future__ import annotations

import json

import pytest
from conftest import DATA

from hpcbench.report import plots
from hpcbench.report.summarize import make_report

LOGS = DATA / "logs"
FILES = [*(f"horovod_{n}.log" for n in (1, 3, 5, 7)), *(f"nccltests_{n}.log" for n in (1, 3, 5, 7, 9, 11)), "ddp_1.log"]


def test_corpus_summary_via_cli(cli, tmp_path):
    out = tmp_path / "report"
    proc = cli("summarize", *(str(LOGS / f) for f in FILES), "--out", str(out), "--format", "github")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = {r["label"]: r for r in json.loads((out / "records.json").read_text())}
    assert set(recs) == set(FILES)  # every log is a row, those without a measurement too
    h1, h3, h7 = recs["horovod_1.log"], recs["horovod_3.log"], recs["horovod_7.log"]
    assert (h1["throughput"], h1["throughput_ci95"], h1["world_size"], h1["model"]) == (4801.4, 42.7, 8, "resnet50")
    assert "8 GPUs from 'Total img/sec on N GPU(s)'" in h1["inferred"] and "batch 32/GPU" in h1["inferred"]
    assert (h3["throughput"], h3["world_size"]) == (124.7, 1)
    # Logs that show no host name may come from anywhere: none is the baseline of another (the old
    # report joined these into one curve and found an efficiency of 481%).
    assert h7["speedup"] is None and h1["speedup"] is None
    assert h1["step_time_ms"] == pytest.approx(32 * 8 / 4801.4 * 1e3)
    # nccl-tests: hosts and ranks inferred from the rank lines
    n1, n3 = recs["nccltests_1.log"], recs["nccltests_3.log"]
    assert (n1["kind"], n1["nodes"], n1["world_size"], n1["ranks_per_node"]) == ("collective", 2, 2, 1)
    assert (n3["nodes"], n3["world_size"]) == (2, 16) and "16 ranks from nccl-tests" in n3["inferred"]
    for name, why in [("nccltests_11.log", "without data rows"), ("horovod_5.log", "NCCL lines only"),
                      ("ddp_1.log", "NCCL lines only")]:
        assert not recs[name]["ok"] and why in recs[name]["reason"], name
    md = (out / "report.md").read_text()
    assert "its log shows no host names, so no other log can be put on its curve" in md  # the baseline column
    assert "![Allreduce bus bandwidth](allreduce_busbw.png)" in md
    assert "inferred 8 GPUs from 'Total img/sec on N GPU(s)'" in md
    assert "481%" not in md
    # logs with no measurement are listed once, not as rows of the scaling tables
    assert "ddp_1.log" in md.split("**not measured", 1)[1].split("\n- **", 1)[0]
    intra = md.split("## Intra-node scaling", 1)[1].split("\n## ", 1)[0]
    assert "ddp_1.log" not in intra and "no result" not in intra and "| horovod " in intra
    # --cluster says they all ran on one cluster: then they are one curve, and the suspicious speedup is said
    same = cli("summarize", *(str(LOGS / f) for f in FILES), "--out", str(tmp_path / "same"), "--cluster", "c1")
    assert same.returncode == 0 and "efficiency 481%" in (tmp_path / "same" / "report.md").read_text()


def test_corpus_tables_and_plots(tmp_path):
    rep = make_report([str(LOGS / f) for f in FILES])
    allreduce = next(t for t in rep.tables if t.key == "allreduce")
    sizes = [r[0] for r in allreduce.rows[:-1]]
    assert sizes[-1] == "16 GiB" and "1 GiB" in sizes
    # no log here names a link with a known rate: the peak row says so and every column has its reason
    assert set(allreduce.rows[-1][1:]) == {"peak unknown"}
    assert any("AWS Libfabric: unknown: network 'AWS Libfabric': its link rate is not in the table" in n
               for n in allreduce.notes)
    # nccltests_11 is a header whose rows are not in the text: an excerpt with no measurement, not a failed point
    header_only = next(a for a in rep.aggs if a.first.label == "nccltests_11.log")
    assert header_only.state == "not measured" and "without data rows" in header_only.reason
    assert not any("nccltests_11.log" in n for n in allreduce.notes)
    col = next(i for i, h in enumerate(allreduce.headers) if h.endswith("AWS Libfabric"))  # nccltests_1.log
    assert allreduce.rows[sizes.index("1 GiB")][col].startswith("3.11 ")  # largest size's out-of-place busbw
    ax = plots.allreduce_bw(rep.aggs).axes[0]
    points = {line.get_label(): len(line.get_xdata()) for line in ax.get_lines() if len(line.get_xdata())}
    # sizes with a busbw above 0 (log axis) of nccltests 3, 7, 9, 5, 1 (31 rows, 9 of them 0.00 GB/s)
    assert sorted(points.values()) == [1, 4, 4, 12, 22]
    # no point failed: no "no figures" entry (the header-only log is listed among the logs with no measurement)
    assert [line.get_label() for line in ax.get_lines() if not len(line.get_xdata())] == []
    trans = {r[0]: r for r in next(t for t in rep.tables if t.key == "transports").rows}
    assert trans["nccltests_1.log"][1:5] == ["2.12.7+cuda11.4", "AWS Libfabric", "—", "NET/AWS Libfabric"]
    assert trans["ddp_1.log"][1:3] == ["2.10.3+cuda11.3", "Socket"]
    assert rep.tables[3].key == "transports" and len(trans) == len(FILES)
    fig = plots.scalability(rep.aggs, "auto")
    # three Horovod logs without host names: three separate points, no curve through them
    series = fig.axes[0].containers
    assert sorted(c.lines[0].get_xdata()[0] for c in series) == [1, 4, 8]
    assert all(len(c.lines[0].get_xdata()) == 1 and c.lines[0].get_linestyle() == "None" for c in series)
