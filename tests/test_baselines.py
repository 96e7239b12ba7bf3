"""Honest baselines (issue 25): one baseline per unit of work across backends, a warning where baselines of the same
work disagree beyond their noise, speedup and efficiency with intervals, "best" only where intervals are apart, and
points run in a seeded shuffled order with repeats in rounds. Every figure is checked against a hand computation."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from report_helpers import make_run, point, record

from hpcbench.figures.aggregate import aggregate
from hpcbench.figures.baseline import apply
from hpcbench.figures.inputs import run_samples
from hpcbench.plan.expand import expand, run_order
from hpcbench.plan.spec import parse
from hpcbench.report import plots
from hpcbench.report.headlines import best_at_each_scale
from hpcbench.report.summarize import make_report
from hpcbench.stats import overlap, ratio_interval, t975


def _noisy(p, throughput, spread):
    """A record whose ten steps scatter +-spread around the step time that gives ``throughput``."""
    step = p.batch_size * p.world_size / throughput
    times = [step * (1 - spread), step * (1 + spread)] * 5
    return record(p, throughput, step_times_s=times, mean_step_time_s=step,
                  step_time_ci95_s=t975(9) * step * spread * math.sqrt(10 / 9) / math.sqrt(10))


def lab(tmp_path, gaps=(100.0, 100.0, 100.0)):
    """Three backends, one rank each (three repeats) and two ranks (one run); ``gaps``: their 1-rank throughputs."""
    out = []
    for (fw, be), thr in zip((("horovod", "mpi"), ("horovod", "gloo"), ("ddp", "gloo")), gaps):
        for r in range(3):
            p = point(framework=fw, backend=be, repeat=r)
            out.append((p, _noisy(p, thr * (1 + 0.01 * (r - 1)), 0.02)))
        two = point(framework=fw, backend=be, rpn=2)
        out.append((two, _noisy(two, 1.6 * thr, 0.02)))
    return make_run(tmp_path / "run", out)


def test_ratio_interval_by_hand():
    # 200 (180-220) / 100 (95-105): the log half-widths add in quadrature, each side on its own
    lo, hi = ratio_interval(200.0, 180.0, 220.0, 100.0, 95.0, 105.0)
    down = math.hypot(math.log(200 / 180), math.log(105 / 100))
    up = math.hypot(math.log(220 / 200), math.log(100 / 95))
    assert lo == pytest.approx(2 * math.exp(-down)) and hi == pytest.approx(2 * math.exp(up))
    assert ratio_interval(200.0, 180.0, math.inf, 100.0, 95.0, 105.0)[1] == math.inf  # no top stays no top
    assert ratio_interval(200.0, 180.0, 220.0, 100.0, 0.0, 105.0)[1] == math.inf  # a baseline reaching 0
    assert ratio_interval(200.0, None, 220.0, 100.0, 95.0, 105.0) == (None, None)
    assert overlap(1, 3, 2, 4) and not overlap(1, 2, 3, 4) and overlap(None, None, 3, 4)


def test_one_shared_baseline_per_unit_of_work(tmp_path):
    rep = make_report([lab(tmp_path).root])
    ones = [a for a in rep.aggs if a.world_size == 1]
    twos = {a.framework + "-" + a.backend: a for a in rep.aggs if a.world_size == 2}
    # the nine 1-rank runs of three backends are one measurement: their mean, over 9 runs
    runs = [s.throughput for a in ones for s in a.samples]
    assert len(runs) == 9 and not rep.baseline.disagree
    for a in twos.values():
        assert a.base_throughput == pytest.approx(sum(runs) / 9)
        assert a.baseline == "shared (9 runs at 1 rank)"
        assert a.speedup == pytest.approx(160.0 / a.base_throughput)
        # the interval: the point's and the shared baseline's, combined as stats.ratio_interval does
        lo, hi = ratio_interval(a.throughput, a.throughput_lo, a.throughput_hi, a.base_throughput, a.base_lo, a.base_hi)
        assert (a.speedup_lo, a.speedup_hi) == pytest.approx((lo, hi)) and lo < a.speedup < hi
        assert (a.efficiency_lo, a.efficiency_hi) == pytest.approx((lo / 2, hi / 2))
    intra = rep.tables[0]
    assert intra.headers[9:11] == ["speedup (95% CI)", "efficiency (95% CI)"]
    row = intra.rows[[r[0] for r in intra.rows].index("ddp")+ 1]  # ddp 1x2 after ddp 1x1
    assert row[9].startswith("1.60 (") and row[10].startswith("80% (")
    assert "baseline: one per unit of work, shared by every framework and backend" in intra.notes
    assert any(n.startswith("shared baseline of mlp weak (batch/rank 32): 9 runs at 1 rank of ddp-gloo, horovod-gloo, "
                            "horovod-mpi pooled: ") for n in intra.notes)


def test_baselines_that_disagree_are_warned_about_in_every_mode(tmp_path):
    rd = lab(tmp_path, gaps=(3720.0, 4569.0, 6821.0))  # issue 25's three 1-rank runs of one work
    rep = make_report([rd.root])
    [group] = rep.baseline.disagree
    assert [a.framework + "-" + a.backend for a in group] == ["horovod-mpi", "horovod-gloo", "ddp-gloo"]
    [warning] = rep.findings["baselines"]
    assert warning.startswith("warning: 1-rank runs of the same work disagree beyond their noise")
    assert "horovod-mpi 1x1 3,720 (" in warning and "ddp-gloo 1x1 6,821 (" in warning
    assert warning in rep.tables[0].notes  # said in the table, too
    # the shared baseline's interval holds the spread between backends: the speedups say so with wide intervals
    two = next(a for a in rep.aggs if a.world_size == 2 and a.framework == "ddp")
    assert two.speedup_hi / two.speedup_lo > 1.4 > 1.1 > two.throughput_hi / two.throughput_lo
    # each backend against its own 1-rank point: the old reading, and still the warning
    aggs = aggregate(run_samples(rd))
    res = apply(aggs, "per-backend")
    assert len(res.disagree) == 1
    ddp2 = next(a for a in aggs if a.world_size == 2 and a.framework == "ddp")
    assert ddp2.baseline == "ddp-gloo 1x1" and ddp2.speedup == pytest.approx(1.6)


def test_best_is_claimed_only_where_the_intervals_are_apart(tmp_path):
    rep = make_report([lab(tmp_path, gaps=(100.0, 101.0, 140.0)).root])
    lines = best_at_each_scale(rep.aggs)
    one = next(line for line in lines if "at 1 ranks" in line)
    assert one.startswith("best at 1 ranks, mlp: ddp-gloo 1x1 140 (")  # 140 is clear of 100 and 101
    two = next(line for line in lines if "at 2 ranks" in line)
    assert two.startswith("best at 2 ranks")
    close = make_report([lab(tmp_path / "close", gaps=(100.0, 101.0, 100.5)).root])
    one = next(line for line in best_at_each_scale(close.aggs) if "at 1 ranks" in line)
    assert one.startswith("no best at 1 ranks, mlp: the fastest, horovod-gloo 1x1 101 (")
    assert "within the noise of ddp-gloo 1x1" in one and "horovod-mpi 1x1" in one
    alone = make_report([make_run(tmp_path / "alone", [(point(), record(point(), 50.0))]).root])
    assert best_at_each_scale(alone.aggs) == ["at 1 ranks, mlp: only ddp-gloo 1x1 50 (50–50) samples/s was measured, "
                                              "nothing to compare"]


SWEEP = """
[sweep]
repeats = 3
{order}
[matrix]
framework = ["ddp", "horovod"]
backend = ["gloo", "mpi"]
nodes = [1, 2]

[[exclude]]
framework = "ddp"
backend = "mpi"
"""


def test_points_run_shuffled_in_rounds_by_a_seed():
    spec = parse(SWEEP.format(order=""), "s.toml")
    points = expand(spec)
    order = run_order(spec, points)
    assert sorted(p.id for p in order) == sorted(p.id for p in points)  # the same points, none lost or doubled
    # three rounds, each every point once, each in its own order
    rounds = [order[i:i + 6] for i in (0, 6, 12)]
    assert all({p.repeat for p in r} == {n} for n, r in enumerate(rounds))
    keys = [[(p.framework, p.backend, p.nodes) for p in r] for r in rounds]
    assert all(sorted(k) == sorted(keys[0]) for k in keys) and len({tuple(k) for k in keys}) > 1
    assert keys[0] != [(p.framework, p.backend, p.nodes) for p in points if p.repeat == 0]  # not the declared order
    assert [p.id for p in run_order(spec, points)] == [p.id for p in order]  # the same seed, the same order
    other = replace(spec, sweep=replace(spec.sweep, seed=2))
    assert [p.id for p in run_order(other, points)] != [p.id for p in order]
    declared = parse(SWEEP.format(order='order = "declared"'), "s.toml")
    assert [p.id for p in run_order(declared, expand(declared))] == [p.id for p in points]


def test_the_plan_records_and_says_its_order(cli, tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP.format(order="seed = 7"))
    out = cli("plan", str(sweep), "--run-dir", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    assert "points run in a shuffled order, in 3 rounds of every point once (seed 7: [sweep] seed" in out.stdout
    plan = json.loads((tmp_path / "r" / "plan.json").read_text())
    assert plan["order"]["order"] == "shuffled" and plan["order"]["seed"] == 7
    spec = parse(sweep.read_text(), str(sweep))
    assert [p["id"] for p in plan["points"]] == [p.id for p in run_order(spec, expand(spec))]
    labels = [line.split()[1] for line in out.stdout.splitlines()[3:21]]  # the table lists them in that order
    assert labels == [p["label"] for p in plan["points"]]


def test_comm_and_compute_are_drawn_in_two_colours(tmp_path):
    p = point(rpn=2)
    rd = make_run(tmp_path / "run", [(p, record(p, 64.0, comm_time_s=0.3, compute_time_s=0.7,
                                                compute_time_ci95_s=0.01, step_time_ci95_s=0.01, comm_fraction=0.3,
                                                comm_method="copy"))])
    fig = plots.comm_compute(make_report([rd.root]).aggs)
    colours = {bars.get_label(): bars.patches[0].get_facecolor() for bars in fig.axes[0].containers}
    assert set(colours) == {"communication", "compute"} and colours["communication"] != colours["compute"]
