"""A number in a table or a point on a curve means what a reader thinks it means: one host is not two
servers, an interval never reaches below zero, a comparison says whether it is more than noise, and the
plots draw failures, noise and foreign logs as what they are. Every figure is computed by hand here."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
from conftest import DATA
from report_helpers import make_run, point, record

from hpcbench.records import RankInfo
from hpcbench.report import plots
from hpcbench.report.compare import compare
from hpcbench.report.summarize import make_report
from hpcbench.stats import t975


def _on_one_host(p, rec):
    """The minicluster: every rank on host 'vm', the Slurm node names still apart."""
    return replace(rec, ranks=[RankInfo(rank=r, local_rank=r % p.ranks_per_node, hostname="vm",
                                        slurm_node=f"node{r // p.ranks_per_node + 1}", pid=r, cpus=[0])
                               for r in range(p.world_size)])


def test_two_slurm_nodes_on_one_host_are_one_server(tmp_path):
    one, two = point(), point(nodes=2, rpn=1)
    rd = make_run(tmp_path / "run", [(one, _on_one_host(one, record(one, 100.0))),
                                     (two, _on_one_host(two, record(two, 180.0)))])
    rep = make_report([rd.root])
    intra, inter = rep.tables[0], rep.tables[1]
    assert not inter.rows  # nothing ran on several hosts
    [flagged] = [r for r in intra.rows if "Slurm nodes" in str(r[4])]
    assert flagged[4] == "1 host (2 Slurm nodes on vm)"
    assert any("asked Slurm for several nodes but ran on one host" in n for n in intra.notes)
    # its speedup is still computed (against the 1-rank point), but it is not offered as an inter-node figure
    assert [a.speedup for a in rep.aggs if a.nodes == 2] == [pytest.approx(1.8)]


def _steps(p, step_means, spread):
    """Records whose mean step times are ``step_means`` (one per repeat), each over 10 steps of +-spread."""
    out = []
    for m in step_means:
        times = [m - spread, m + spread] * 5
        rec = record(p, p.batch_size * p.world_size / m)
        h = t975(9) * math.sqrt(sum((t - m) ** 2 for t in times) / 9) / math.sqrt(10)
        out.append(replace(rec, step_times_s=times, mean_step_time_s=m, step_time_ci95_s=h))
    return out


def test_intervals_follow_their_basis_and_never_reach_below_zero(tmp_path):
    # 3 repeats whose step times scatter so widely that a symmetric interval would reach below zero
    reps = [point(repeat=r) for r in range(3)]
    recs = _steps(reps[0], [0.1, 0.5, 0.9], 0.0)
    two = [point(rpn=2, repeat=r) for r in range(2)]
    recs2 = _steps(two[0], [0.2, 0.2], 0.02)
    rd = make_run(tmp_path / "run", [*zip(reps, recs), *zip(two, recs2)])
    rep = make_report([rd.root])
    a = {x.ranks_per_node: x for x in rep.aggs}
    # 3 repeats: Student's t over the runs; t - h < 0, so throughput's upper end is unbounded, its lower end k/(t+h)
    m, h = 0.5, t975(2) * 0.4 / math.sqrt(3)
    assert a[1].ci_basis == "runs" and a[1].step_time_s == pytest.approx(m) and a[1].step_time_ci95_s == pytest.approx(h)
    k = a[1].throughput * m
    assert a[1].throughput_lo == pytest.approx(k / (m + h)) and math.isinf(a[1].throughput_hi)
    # 2 repeats: the interval is over each run's steps (combined), and the table says so
    h1 = t975(9) * math.sqrt(10 * 0.02 ** 2 / 9) / math.sqrt(10)
    assert a[2].ci_basis == "steps" and a[2].step_time_ci95_s == pytest.approx(math.sqrt(2 * h1 * h1) / 2)
    row = {r[5]: r for r in rep.tables[0].rows}
    assert row[1][6] == "3/3 (runs)" and row[2][6] == "2/2 (steps)"
    assert row[1][7].startswith("500.00 (0.00–") and "–∞)" in row[1][8]  # neither below zero
    assert any("fewer than 3 repeats" in n for n in rep.tables[0].notes)
    # the plot: no bar below zero; the unbounded top is an arrow, not a bar to an invented height
    ax = plots.scalability(rep.aggs, "auto").axes[0]
    bars = [seg for c in ax.containers for coll in c.lines[2] for seg in coll.get_segments()]
    assert bars and min(y for seg in bars for _, y in seg) >= 0
    arrows = [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    assert [(t.xy, t.xyann) for t in arrows] == [((1, 1.0), (1, a[1].throughput))]  # from the point to the top
    assert ax.get_ylim()[0] == 0


def test_compare_says_whether_a_difference_is_more_than_noise(tmp_path):
    p1, p2, p4 = point(), point(rpn=2), point(rpn=4)
    old = make_run(tmp_path / "old", [(p1, _steps(p1, [0.100], 0.010)[0]), (p2, _steps(p2, [0.100], 0.010)[0]),
                                      (p4, _steps(p4, [0.100], 0.010)[0])])
    v = {"torch": "2.13.0", "hpcbench": "0.1.0"}
    new_recs = [_steps(p1, [0.099], 0.010)[0], _steps(p2, [0.080], 0.010)[0], _steps(p4, [0.120], 0.010)[0]]
    q1, q2, q4 = (replace(p, steps=50) for p in (p1, p2, p4))  # NEW also ran more steps: said, not hidden
    new = make_run(tmp_path / "new", [(q, replace(r, versions={**v, "torch": "2.14.1"}))
                                      for q, r in zip((q1, q2, q4), new_recs)])
    old_recs_versions = make_report([old.root]).aggs
    for a in old_recs_versions:
        for s in a.samples:
            s.versions = v
    t = compare(old_recs_versions, make_report([new.root]).aggs)
    verdicts = {r[4]: r[10] for r in t.rows}
    assert verdicts["1x1"].startswith("within noise")  # 1% apart, 10% step noise
    assert verdicts["1x2"].startswith("faster") and verdicts["1x4"].startswith("slower")
    assert "differs: parameter steps: 4 → 50" in t.notes and "differs: torch version: 2.13.0 → 2.14.1" in t.notes


def test_plots_draw_noise_as_noise_and_name_foreign_logs(tmp_path):
    p = point(rpn=2)
    noisy = record(p, 100.0, comm_time_s=0.05, compute_time_s=0.59, compute_time_ci95_s=0.2, comm_method="m",
                   step_time_ci95_s=0.1)
    rd = make_run(tmp_path / "run", [(p, noisy)])
    logs = DATA / "logs"
    rep = make_report([rd.root, str(logs / "horovod_1.log"), str(logs / "horovod_7.log")])
    ax = plots.comm_compute(rep.aggs).axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert any("within noise" in label for label in labels) and "communication" not in labels
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert not any("?x?" in t or "-?" in t for t in ticks), ticks
    assert any(t.startswith("horovod resnet50\n8 ranks, hosts not shown") for t in ticks), ticks
