"""Root cause first, and the run first: explain's ranking and crediting, its run summary, and the key every fix
names, on a real run.

tests/data/runs/lab-minicluster is the lab a student runs (tests/data/runs/lab-minicluster.toml): Horovod-MPI,
Horovod-Gloo and DDP-Gloo on 1-2 nodes x 1-2 ranks, 12 points, made by `hpcbench sweep` on this project's local
2-node Slurm (both Slurm nodes on one 2-CPU host) while other jobs ran on it; its records and provenance are
kept as the ranks wrote them (README.md there).
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DATA, REPO

from hpcbench.explain import explain_paths, keys, rules
from hpcbench.explain.render import as_json, as_markdown, as_table
from hpcbench.explain.summary import short_labels, summarize
from hpcbench.plan.cluster import PROFILE_KEYS
from hpcbench.plan.fields import BY_NAME, SLURM_BY_NAME, SWEEP
from hpcbench.vocab import ERROR, WARNING

LAB = DATA / "runs" / "lab-minicluster"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The lab run, its cluster profile the repository's minicluster.toml (cluster.txt holds an absolute path)."""
    root = tmp_path_factory.mktemp("lab") / "run"
    shutil.copytree(LAB, root)
    (root / "cluster.txt").write_text(str(REPO / "clusters" / "minicluster.toml") + "\n")
    return root


@pytest.fixture(scope="module")
def whys(lab):
    return explain_paths([lab])


def _by_label(whys):
    return {w.label: w for w in whys}


def test_oversubscription_leads_and_takes_the_symptoms_it_produces(whys):
    """On the 2x2 points both Slurm nodes' 2 ranks share one 2-CPU host: the cause leads, and the comm share,
    lagging rank and shared cores it produces are credited to it and listed under it (they once led instead)."""
    got = _by_label(whys)
    for label in ("hvd-mpi-mlp-b32-n2x2", "hvd-gloo-mlp-b32-n2x2", "gloo-mlp-b32-n2x2"):
        w = got[label]
        first = w.findings[0]
        assert first.rule == "oversubscribed" and first.because is None and "2.0x oversubscribed" in first.claim
        under = w.under(first)
        assert {"shared-cores", "comm-share"} <= {f.rule for f in under}, label
        assert all(f.because == "oversubscribed" for f in under)
        assert w.findings[1:1 + len(under)] == under  # shown right under it
        # its estimated effect is the largest of its own and of what it explains
        assert w.effect(first) == max(f.cost for f in [first, *under] if f.cost is not None)
    assert got["hvd-mpi-mlp-b32-n2x2"].effect(got["hvd-mpi-mlp-b32-n2x2"].findings[0]) == pytest.approx(
        next(f.cost for f in got["hvd-mpi-mlp-b32-n2x2"].findings if f.rule == "comm-share"))


def test_every_symptom_whose_cause_is_found_is_credited_and_causes_are_ranked_by_effect(whys):
    table = rules.explains()
    for w in whys:
        for f in w.findings:
            causes = [c for c in w.findings if c is not f and c.severity in (ERROR, WARNING) and f.rule in table.get(
                c.rule, ()) and c.rule != f.rule]
            if causes and not f.own_cause:
                assert f.because is not None, (w.label, f.rule, [c.rule for c in causes])
        tops = [w.effect(f) for f in w.top() if f.rule not in rules.caveats()]
        known = [e for e in tops if e is not None]
        assert known == sorted(known, reverse=True) and tops[:len(known)] == known, (w.label, tops)
        # the caveats about the figures come after the causes
        kinds = [f.rule in rules.caveats() for f in w.top()]
        assert kinds == sorted(kinds), w.label


def test_the_causal_table_is_acyclic():
    table = rules.explains()

    def reach(rule, seen):
        for s in table.get(rule, ()):
            assert s not in seen, f"the causal table turns back: {' -> '.join([*seen, s])}"
            reach(s, [*seen, s])

    for cause in table:
        reach(cause, [cause])


def test_the_run_is_said_first_and_each_finding_once(whys):
    run = summarize(whys)
    assert [s.rule for s in run.causes][:1] != [] and {"oversubscribed", "one-host"} <= {s.rule for s in run.causes}
    over = next(s for s in run.causes if s.rule == "oversubscribed")
    assert sorted(over.points) == ["gloo-mlp-b32-n2x2", "hvd-gloo-mlp-b32-n2x2", "hvd-mpi-mlp-b32-n2x2"]
    assert over.explains["shared-cores"] == 3
    few = next(s for s in run.caveats if s.rule == "few-repeats")
    assert len(few.points) == 12  # said once, for all twelve
    for w in whys:  # a point lists only what the run's summary did not say
        assert all(f.rule not in {s.rule for s in run.caveats} | {s.rule for s in run.common}
                   or f.severity != few.severity for f in run.differs(w))
    text = as_table(whys)
    lines = text.splitlines()
    # about 40 for 12 points (the listing of one finding per line was 345): 47 with its 4 causes, each 4-7 lines
    assert len(lines) <= 48, text
    assert lines[0] == f"12 points; {len(run.causes)} causes explain this run:"
    assert lines[1].startswith(f"1. {run.causes[0].rule} (")
    assert text.count("few-repeats") == 1 and text.count("1 repeat(s)") == 1
    short = short_labels([w.label for w in whys])
    assert short["hvd-mpi-mlp-b32-n2x2"] == "hvd-mpi-n2x2"  # mlp and b32 are every point's
    row = next(ln for ln in lines if ln.strip().startswith("hvd-mpi-n2x2 "))
    assert row.split()[2].startswith("oversubscribed")  # each point's line names its causes, the first first


def test_all_shows_every_finding(whys):
    text = " ".join(as_table(whys, everything=True).split())
    every = [f for w in whys for f in w.findings]
    assert all(" ".join(f.claim.split()) in text for f in every)
    assert all(" ".join(f.evidence.split())[:100] in text for f in every if f.evidence)
    short = " ".join(as_table(whys).split())
    assert sum(" ".join(f.claim.split()) in short for f in every) < len(every) / 3


def test_json_and_markdown_carry_the_same_structure(whys):
    doc = json.loads(as_json(whys))
    run = summarize(whys)
    assert doc["schema"] == "hpcbench.explain/2" and doc["run"]["points"] == 12
    assert [c["rule"] for c in doc["run"]["causes"]] == [s.rule for s in run.causes]
    assert [p["point"] for p in doc["points"]] == [w.label for w in whys]
    mpi = next(p for p in doc["points"] if p["point"] == "hvd-mpi-mlp-b32-n2x2")
    w = next(w for w in whys if w.label == "hvd-mpi-mlp-b32-n2x2")
    assert mpi["causes"][0] == "oversubscribed" and mpi["caveats"] == run.cautions(w)
    assert {f["because"] for f in mpi["findings"] if f["rule"] == "comm-share"} == {"oversubscribed"}
    md = as_markdown(whys, everything=False)
    i = md.index("- **hvd-mpi-mlp-b32-n2x2**")
    block = md[i:md.index("\n- **", i + 1)]
    # the symptom nested under its cause
    assert block.index("\n  - warning: oversubscribed:") < block.index("\n    - warning: comm-share:")
    assert "few-repeats" not in md and "few-repeats" in as_markdown(whys, everything=True)


def test_explain_cli_all_and_line_counts(cli, lab):
    short = cli("explain", str(lab))
    full = cli("explain", str(lab), "--all")
    assert short.returncode == full.returncode == 0, short.stderr + full.stderr
    assert len(short.stdout.splitlines()) <= 48 and len(full.stdout.splitlines()) > 300
    assert "(--all: every finding, with evidence)" in short.stdout and "--all" in cli("explain", "--help").stdout


def test_the_report_opens_with_the_run_and_its_main_table(cli, lab, tmp_path):
    proc = cli("summarize", str(lab), "--out", str(tmp_path / "rep"), "--no-plots", "--no-history")
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    heads = [ln for ln in md.splitlines() if ln.startswith("## ")]
    assert heads[:3] == ["## What explains this run", "## Intra-node scaling (one server)", "## Why, point by point"]
    opening = md.split("## What explains this run", 1)[1].split("\n## ", 1)[0]
    assert "causes explain this run** (12 points)" in opening and "1. **" in opening
    assert heads.count("## Intra-node scaling (one server)") == 1  # the main table is not repeated below


# --- every fix names the exact key to change -----------------------------------------------------------------

def _known_keys() -> set[str]:
    """Every key a sweep or a cluster profile may set, from their declarations."""
    return set(BY_NAME) | set(SLURM_BY_NAME) | {s.name for s in SWEEP} | set(PROFILE_KEYS)


def _constructed(tmp_path):
    """Runs of hpcbench's record format whose values make the rules that need a GPU or a foreign tool fire."""
    from report_helpers import make_run, point, record

    from hpcbench.files import atomic_write_json
    from hpcbench.records import NodeLoad

    p = point(nodes=2, rpn=2, device="cuda", backend="nccl", framework="horovod")
    rec = record(p, 100.0, gpu_numa_ok=False, gpu_numa_detail="rank 1: GPU 1 is on NUMA node 0",
                 input_fraction=0.3, rank_compute_s=[0.1, 0.1, 0.1, 0.5], timeline="timeline.json",
                 node_load=[NodeLoad("h1", n, 2, [9.0, 5.0, 2.0], [9.0, 5.0, 2.0], 2, 2, 2) for n in ("n1", "n2")])
    rd = make_run(tmp_path / "gpu", [(p, rec)])
    for r in range(2):
        atomic_write_json(rd.point(p).dir / f"provenance-rank{r}.json", {
            "schema": "hpcbench.provenance/1", "rank": r, "local_rank": r, "hostname": "h1",
            "env": {"NCCL_P2P_DISABLE": "1"},
            "affinity": {"cpus": [0], "requested": "slurm mask_cpu:0x3", "matches": False, "detail": "cpus [0]"}})
    q = point(nodes=1, rpn=1, framework="horovod", backend="gloo")
    done = make_run(tmp_path / "timeout", [(q, "killed")])
    return [rd.root, done.root]


def test_every_fix_names_a_key_that_exists(whys, tmp_path):
    """Walk every finding of the lab run, of the public logs and of constructed records: a fix about a point hpcbench
    ran names at least one key, and every key a fix names is one plan/fields.py or the cluster profile declares."""
    known = _known_keys()
    found = [(w, f) for w in whys for f in w.findings]
    found += [(w, f) for w in explain_paths([DATA / "logs"]) for f in w.findings]
    found += [(w, f) for w in explain_paths(_constructed(tmp_path)) for f in w.findings]
    rules_seen = set()
    for w, f in found:
        if f.fix is None:
            continue  # an info with nothing to change
        named = keys.named(f.fix)
        # a log of a job hpcbench did not launch has no sweep behind it: its fix names a key where one applies
        assert named or w.point.point_id is None, f"{f.rule}: its fix names no key: {f.fix}"
        assert set(named) <= known, f"{f.rule}: unknown key(s) {set(named) - known} in: {f.fix}"
        rules_seen.add(f.rule)
    # the rules about where the ranks ran, the figures and the transports all had their fix read
    assert {"oversubscribed", "one-host", "shared-cores", "straggler", "input", "binding", "load", "gpu-numa",
            "comm-share", "few-repeats", "within-noise", "timeline", "nccl-env",
            "shm-not-p2p"} <= rules_seen, rules_seen


def test_a_fix_names_the_profile_key_where_the_value_came_from(whys):
    """The lab's cpus_per_task comes from clusters/minicluster.toml (its sweep sets none): that file's key is
    named; ranks_per_node is the sweep's [matrix] axis."""
    over = next(f for w in whys for f in w.findings if f.rule == "oversubscribed")
    assert "clusters/minicluster.toml: cpus_per_task" in over.fix and "[matrix] ranks_per_node" in over.fix
    assert keys.key("repeats") == "[sweep] repeats" and keys.key("steps") == "[workload] steps"
    assert keys.key("cpu_bind") == "[slurm] cpu_bind" and keys.key("env", var="NCCL_ALGO") == "[slurm.env] NCCL_ALGO"
    with pytest.raises(KeyError):
        keys.key("no_such_key")
