"""summarize on constructed records: every figure is checked against a hand computation."""
from __future__ import annotations

import math
import struct

import pytest
from report_helpers import make_run, point, record

from hpcbench.figures.aggregate import aggregate
from hpcbench.figures.baseline import apply
from hpcbench.report import plots
from hpcbench.figures.inputs import run_samples
from hpcbench.report.summarize import make_report, write
from hpcbench.stats import mean_ci95, t975

T1 = 12.706  # t(0.975, df=1)


def test_t_quantiles_and_ci_by_hand():
    # summarize uses the workload's statistics: one definition of the CI for records and repeats alike
    assert t975(1) == pytest.approx(12.706, abs=1e-3) and t975(4) == pytest.approx(2.776, abs=1e-3)
    # beyond the table, the expansion must meet the published values
    assert t975(40) == pytest.approx(2.0211, abs=2e-4) and t975(120) == pytest.approx(1.9799, abs=2e-4)
    m, ci = mean_ci95([10.0, 12.0, 14.0])
    assert m == 12.0 and ci == pytest.approx(4.303 * 2.0 / math.sqrt(3), rel=1e-4)
    assert mean_ci95([5.0]) == (5.0, None)


def scaling_run(tmp_path):
    p11a, p11b = point(repeat=0), point(repeat=1)
    p12, p22, p21, p14 = point(rpn=2), point(nodes=2, rpn=2), point(nodes=2, rpn=1), point(rpn=4)
    none = point(framework="none", backend="none")
    return make_run(tmp_path / "run", [
        (p11a, record(p11a, 100.0)), (p11b, record(p11b, 110.0)), (p12, record(p12, 180.0)),
        (p22, record(p22, 300.0)), (p21, "CUDA out of memory"), (p14, None), (none, record(none, 120.0))])


def by_layout(aggs, framework="ddp"):
    return {a.layout: a for a in aggs if a.framework == framework}


def test_speedup_efficiency_and_repeat_ci_by_hand(tmp_path):
    rd = scaling_run(tmp_path)
    rep = make_report([rd.root])
    a = by_layout(rep.aggs)
    # two repeats of 1x1: mean 105; fewer than 3 repeats, so the interval is over each run's steps, not over
    # the runs (a t interval over 2 runs would be t(1) = 12.7 wide): here every step took the same time
    assert a["1x1"].throughput == pytest.approx(105.0)
    assert a["1x1"].ci_basis == "steps" and a["1x1"].step_time_ci95_s == pytest.approx(0.0)
    assert a["1x1"].throughput_lo == pytest.approx(105.0) == a["1x1"].throughput_hi
    # one baseline for the work (mlp, batch 32, cpu): the 1-rank runs of ddp (100, 110) and of framework none
    # (120) pooled as three runs of one measurement: 110 samples/s
    assert a["1x2"].speedup == pytest.approx(180 / 110) and a["1x2"].efficiency == pytest.approx(180 / 110 / 2)
    assert a["2x2"].speedup == pytest.approx(300 / 110) and a["2x2"].efficiency == pytest.approx(300 / 110 / 4)
    assert a["1x2"].baseline == "shared (3 runs at 1 rank)"
    assert "shared baseline of mlp weak (batch/rank 32): 3 runs at 1 rank of ddp-gloo, none-none pooled: 110.0 (" \
        in "\n".join(rep.tables[0].notes)
    assert a["1x2"].base_throughput == pytest.approx(110.0)
    # a single repeat keeps the CI over its own steps: all steps equal here, so zero
    assert a["1x2"].throughput_lo == pytest.approx(180.0) == a["1x2"].throughput_hi
    # failed and missing points are rows with their state and reason, never dropped
    assert not a["2x1"].ok and "CUDA out of memory" in a["2x1"].reason and a["2x1"].speedup is None
    assert not a["1x4"].ok and "left the queue" in a["1x4"].reason
    intra, inter = rep.tables[0], rep.tables[1]
    assert len(intra.rows) == 4 and len(inter.rows) == 2  # ddp 1x1, 1x2, 1x4 (missing) and the none run
    assert any("CUDA out of memory" in str(r) for r in inter.rows)
    assert any("2x1" in f and "CUDA out of memory" in f for f in rep.findings["points without a result (failed, missing or not finished)"])
    # tidy rows: one per point x repeat, with the per-sample speedup against the aggregated baseline
    tidy = rep.tidy()
    assert len(tidy) == 7
    assert sorted(r["speedup"] for r in tidy if r["speedup"] and r["world_size"] == 1 and r["framework"] == "ddp") == \
        pytest.approx([100 / 110, 110 / 110])


def test_baselines_no_framework_and_single_node(tmp_path):
    rd = scaling_run(tmp_path)
    aggs = aggregate(run_samples(rd))
    res = apply(aggs, "no-framework")
    a = by_layout(aggs)
    assert "framework = none" in res.description
    assert a["1x2"].speedup == pytest.approx(1.5) and a["1x2"].efficiency == pytest.approx(0.75)
    assert a["2x2"].speedup == pytest.approx(2.5) and a["2x2"].efficiency == pytest.approx(0.625)
    assert a["1x2"].baseline == "none-none 1x1"

    aggs = aggregate(run_samples(rd))
    apply(aggs, "single-node")
    a = by_layout(aggs)
    assert a["2x2"].speedup == pytest.approx(300 / 180) and a["2x2"].efficiency == pytest.approx(300 / 180 / 2)
    assert a["2x2"].baseline == "ddp-gloo 1x2"


def test_auto_baseline_falls_back_and_says_so(tmp_path):
    p12, p22 = point(rpn=2), point(nodes=2, rpn=2)
    rd = make_run(tmp_path / "run", [(p12, record(p12, 200.0)), (p22, record(p22, 300.0))])
    aggs = aggregate(run_samples(rd))
    assert apply(aggs, "single-gpu").missing  # strict: no 1-rank point, no speedup, said out loud
    assert all(a.speedup is None for a in aggs)
    apply(aggs, "auto")
    a = by_layout(aggs)
    assert a["2x2"].speedup == pytest.approx(1.5) and a["2x2"].efficiency == pytest.approx(0.75)
    assert "smallest measured" in a["2x2"].baseline


def test_weak_and_strong_scaling_are_labelled_and_not_mixed(tmp_path):
    w1, w2 = point(), point(rpn=2)
    s1, s2 = point(batch=64, global_batch=64), point(batch=32, rpn=2, repeat=5, global_batch=64)
    rd = make_run(tmp_path / "run", [
        (w1, record(w1, 100.0)), (w2, record(w2, 150.0)),
        (s1, record(s1, 50.0, scaling="strong", global_batch_size=64)),
        (s2, record(s2, 90.0, scaling="strong", global_batch_size=64))])
    rep = make_report([rd.root])
    rows = {(a.scaling, a.layout): a for a in rep.aggs}
    assert rows[("weak", "1x2")].speedup == pytest.approx(1.5)
    assert rows[("strong", "1x2")].speedup == pytest.approx(1.8)
    text = rep.tables[0].render()
    assert "weak (batch/rank 32)" in text and "strong (global batch 64)" in text


def _png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def _curve(ax, color):
    """(x, y) of the errorbar lines drawn in ``color``, by marker: one per node count."""
    return {c.lines[0].get_marker(): (list(c.lines[0].get_xdata()), list(c.lines[0].get_ydata()))
            for c in ax.containers if c.lines[0].get_color() == color}


def test_plots_exist_and_hold_the_points(tmp_path):
    rep = make_report([scaling_run(tmp_path).root])
    fig = plots.scalability(rep.aggs, "auto")
    ax = fig.axes[0]
    [legend] = fig.legends  # below the axes, never over a point
    fig.canvas.draw()
    box, frame = legend.get_window_extent(), ax.get_window_extent()
    assert box.y1 < frame.y0 and not box.overlaps(frame)
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels[0].startswith("ddp-gloo mlp") and labels[1].startswith("none mlp")
    assert "1 node (marker)" in labels and "2 nodes (marker)" in labels
    # every layout drawn: ddp on one node (1x1, 1x2) and on two (2x2); 1x2 and none's 1x1 stand side by side
    ddp = _curve(ax, "C0")
    xs, ys = ddp["o"]
    assert [round(x) for x in xs] == [1, 2] and ys == pytest.approx([105, 180])
    assert ddp["s"][0] == [4] and ddp["s"][1] == pytest.approx([300])
    assert xs[0] != 1 and _curve(ax, "C1")["o"][0][0] != 1  # two points at 1 rank: dodged apart
    # the ideal line: the one shared baseline's throughput (110: ddp's 100 and 110 with none's 120) times the ranks
    ideal = next(line for line in ax.get_lines() if line.get_label().startswith("ideal"))
    assert list(ideal.get_ydata()) == pytest.approx([110, 220, 440])
    assert ax.get_xlabel() == "total ranks" and "samples/s" in ax.get_ylabel() and ax.get_title()  # CPU: ranks
    # failed and missing points are on the plot too: an x at their size, with their state
    [failed] = [line for line in ax.get_lines() if line.get_label().startswith("no result")]
    assert sorted(failed.get_xdata()) == [2, 4]
    assert sorted(t.get_text() for t in ax.texts) == ["FAILED", "MISSING"]

    fig = plots.speedup_efficiency(rep.aggs, "auto")
    sp, eff = fig.axes
    assert _curve(sp, "C0")["o"][1] == pytest.approx([105 / 110, 180 / 110])
    assert _curve(eff, "C0")["o"][1] == pytest.approx([100 * 105 / 110, 100 * 180 / 110 / 2])
    assert _curve(eff, "C0")["s"][1] == pytest.approx([100 * 300 / 110 / 4])
    assert "%" in eff.get_ylabel()

    fig = plots.comm_compute(rep.aggs)
    bars = [p for p in fig.axes[0].patches]
    assert len(bars) == 4  # 1x1, 1x2, 2x2 of ddp and the none run: measured points only, step not split

    out = tmp_path / "report"
    write(rep, out)
    for name in ("scalability.png", "speedup_efficiency.png", "comm_compute.png"):
        w, h = _png_size(out / name)
        assert w >= 600 and h >= 400, name
    assert "not drawn" in rep.plots["allreduce_busbw.png"]
    md = (out / "report.md").read_text()
    assert "![Scalability curve](scalability.png)" in md and "Baseline (auto)" in md
    assert len((out / "records.csv").read_text().splitlines()) == 1 + 7
