"""The report of a sweep with axes beyond the standing ones (issue 14): points that differ in an environment
variable or in steps are never averaged as repeats nor joined on one curve, and every table, legend, baseline
name and records.csv says which is which."""
from __future__ import annotations

import csv
from dataclasses import replace

import pytest
from conftest import DATA
from report_helpers import make_run, point, record

import hpcbench
from hpcbench.figures.aggregate import aggregate
from hpcbench.plan.expand import point_id
from hpcbench.report import plots
from hpcbench.report.compare import compare
from hpcbench.figures.inputs import run_samples
from hpcbench.report.summarize import make_report, sweep_summary, write


def axis_point(rpn=1, steps=4, env=(), slurm=()):
    """A point of a sweep with axes: its id, like expand's, has its env and [slurm] axes in it."""
    p = replace(point(rpn=rpn), steps=steps, env=env, slurm=slurm)
    extra = "".join(f"-{k}{v}" for k, v in (*env, *slurm))
    return replace(p, id=point_id({**p.params(), "env": env, "slurm": slurm}), label=f"{p.label}-s{steps}{extra}")


IB = (("NCCL_IB_DISABLE", "0"),)
TCP = (("NCCL_IB_DISABLE", "1"),)


def ib_vs_tcp(tmp_path, name="run"):
    """The same layouts with InfiniBand (100, 180 samples/s) and without (50, 60): two curves."""
    pts = [(axis_point(1, env=IB), 100.0), (axis_point(2, env=IB), 180.0),
           (axis_point(1, env=TCP), 50.0), (axis_point(2, env=TCP), 60.0)]
    return make_run(tmp_path / name, [(p, record(p, thr)) for p, thr in pts])


def test_two_env_values_are_two_curves_each_with_its_own_baseline(tmp_path):
    rep = make_report([ib_vs_tcp(tmp_path).root])
    by = {(a.env, a.ranks_per_node): a for a in rep.aggs}
    assert len(rep.aggs) == 4 and all(a.n_ok == 1 for a in rep.aggs)  # never averaged
    assert [by[IB, r].throughput for r in (1, 2)] == [100.0, 180.0]
    assert [by[TCP, r].throughput for r in (1, 2)] == [50.0, 60.0]
    assert by[IB, 2].speedup == pytest.approx(1.8) and by[TCP, 2].speedup == pytest.approx(1.2)
    assert by[TCP, 2].baseline == "ddp-gloo 1x1 (NCCL_IB_DISABLE=1)" and by[IB, 1].apart == "NCCL_IB_DISABLE=0"
    intra = rep.tables[0]
    col = intra.headers.index("settings")
    assert intra.headers[col - 1] == "scaling"
    # each curve's rows together: the settings, then the layout
    assert [(r[col], r[intra.headers.index("ranks/server")]) for r in intra.rows] == [
        ("NCCL_IB_DISABLE=0", 1), ("NCCL_IB_DISABLE=0", 2), ("NCCL_IB_DISABLE=1", 1), ("NCCL_IB_DISABLE=1", 2)]
    eff = "\n".join(rep.findings["efficiency at the largest scale"])
    assert "(NCCL_IB_DISABLE=0)" in eff and "(NCCL_IB_DISABLE=1)" in eff


def test_the_plots_draw_one_curve_per_env_value(tmp_path):
    rep = make_report([ib_vs_tcp(tmp_path).root])
    ax = plots.scalability(rep.aggs, "auto").axes[0]
    curves = {c.get_label(): list(c.lines[0].get_ydata()) for c in ax.containers}  # errorbar: (line, caps, bars)
    assert sorted(curves.values()) == [[50.0, 60.0], [100.0, 180.0]]
    assert [name.endswith(f"NCCL_IB_DISABLE={v}") for name, v in zip(sorted(curves), "01")] == [True, True]


def test_records_csv_and_the_api_have_a_column_per_env_axis(tmp_path):
    rd = ib_vs_tcp(tmp_path)
    rep = make_report([rd.root])
    write(rep, tmp_path / "out", plots=False)
    with open(tmp_path / "out" / "records.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted((r["env.NCCL_IB_DISABLE"], r["ranks_per_node"]) for r in rows) == [
        ("0", "1"), ("0", "2"), ("1", "1"), ("1", "2")]
    df = hpcbench.load(rd.root)
    assert df.groupby("env.NCCL_IB_DISABLE")["throughput"].max().to_dict() == {"0": 180.0, "1": 60.0}
    # the end-of-sweep table: a column for what varies
    text, _ = sweep_summary(rd)
    assert text.splitlines()[0].split()[:4] == ["framework", "backend", "model", "env.NCCL_IB_DISABLE"]


def test_a_foreign_log_beside_a_run_adds_no_noise_to_the_names(tmp_path):
    """A log does not know its steps or lr: that is no difference to name; its GPUs and a run's env axis are."""
    rep = make_report([ib_vs_tcp(tmp_path).root, DATA / "logs" / "horovod_1.log"])
    runs = [a for a in rep.aggs if a.point_id]
    assert sorted(a.apart for a in runs) == ["device=cpu, NCCL_IB_DISABLE=0"] * 2 + ["device=cpu, NCCL_IB_DISABLE=1"] * 2
    assert [a.apart for a in rep.aggs if not a.point_id] == ["device=cuda"]


def test_points_that_differ_only_in_steps_are_not_repeats(tmp_path):
    a, b = axis_point(steps=4), axis_point(steps=8)
    rd = make_run(tmp_path / "run", [(a, record(a, 100.0)), (b, record(b, 300.0))])
    aggs = aggregate(run_samples(rd))
    assert sorted((x.steps, x.throughput, x.n_ok) for x in aggs) == [(4, 100.0, 1), (8, 300.0, 1)]
    assert sorted(x.apart for x in aggs) == ["steps=4", "steps=8"]
    # and a measured [slurm] axis the same way
    c, d = axis_point(slurm=(("cpus_per_task", 1),)), axis_point(slurm=(("cpus_per_task", 2),))
    rd = make_run(tmp_path / "run2", [(c, record(c, 100.0)), (d, record(d, 300.0))])
    aggs = aggregate(run_samples(rd))
    assert sorted(x.apart for x in aggs) == ["cpus_per_task=1", "cpus_per_task=2"]


def test_compare_matches_on_what_varies_within_a_side_and_lists_the_rest(tmp_path):
    def run(name, pts):
        rd = make_run(tmp_path / name, [(p, record(p, thr)) for p, thr in pts])
        return aggregate(run_samples(rd))

    both = [(axis_point(steps=4), 100.0), (axis_point(steps=8), 200.0)]
    t = compare(run("old", both), run("new", [(p, 2 * thr) for p, thr in both]))
    col = t.headers.index("settings")
    assert sorted((r[col], r[t.headers.index("ratio")], r[t.headers.index("in")]) for r in t.rows) == [
        ("steps=4", "2.000", "both"), ("steps=8", "2.000", "both")]
    # constant within each side, different between them: matched, and said under the table
    ring, tree = (("NCCL_ALGO", "Ring"),), (("NCCL_ALGO", "Tree"),)
    t = compare(run("ring", [(axis_point(env=ring), 100.0)]), run("tree", [(axis_point(steps=8, env=tree), 90.0)]))
    assert len(t.rows) == 1 and "settings" not in t.headers and t.rows[0][t.headers.index("in")] == "both"
    assert "differs: parameter steps: 4 → 8" in t.notes and "differs: setting env.NCCL_ALGO: Ring → Tree" in t.notes
