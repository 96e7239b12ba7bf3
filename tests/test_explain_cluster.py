"""hpcbench explain on causes made for real on the local 2-node Slurm and the local backend: a straggler
(slow_rank), oversubscribed cores, unbound ranks, one host posing as two nodes. Each rule must name
its cause, with its evidence, on the point that has it, and stay silent on the points that do not.

The minicluster's two Slurm nodes share one 2-CPU host: 2 nodes x 2 ranks ask for 4 CPUs on it."""

from __future__ import annotations

import json

import pytest
from conftest import sweep_ok, write

from hpcbench.explain import explain_paths

SWEEP = """
[sweep]
name = "{name}"
[slurm]
partition = "debug"
time = "00:05:00"
cpus_per_task = 1
cpu_bind = "{bind}"
[workload]
framework = "ddp"
backend = "gloo"
device = "cpu"
model = "mlp"
batch_size = 32
steps = 8
warmup_steps = 1
slow_rank = {slow}
slow_ms = 150
[matrix]
nodes = {nodes}
ranks_per_node = {rpn}
"""


def _rules(run) -> dict[tuple[int, int], dict[str, object]]:
    """(nodes, ranks per node) -> {rule: finding} for every point of the run."""
    return {(w.point.nodes, w.point.ranks_per_node): {f.rule: f for f in w.findings} for w in explain_paths([run])}


def _affinities(run, nodes: int, rpn: int) -> list[list[int]]:
    """Each rank's CPUs as its provenance recorded them."""
    from hpcbench.rundir import RunDir

    rd = RunDir.open(run)
    p = next(p for p in rd.points() if (p.nodes, p.ranks_per_node) == (nodes, rpn))
    return [json.loads(f.read_text())["affinity"]["cpus"] for f in rd.point(p).provenances()]


def _node_cpus(run, nodes: int, rpn: int) -> int:
    """The CPUs a node of the point could use, as its load probe recorded them (its cpuset's, else the host's)."""
    from hpcbench.rundir import RunDir

    rd = RunDir.open(run)
    p = next(p for p in rd.points() if (p.nodes, p.ranks_per_node) == (nodes, rpn))
    return json.loads(rd.point(p).result.read_text())["node_load"][0]["cpus"]


def _node_of_rank(run, nodes: int, rpn: int, rank: int) -> str:
    """The Slurm node a rank ran on, as the rank recorded it (Slurm picks which node a 1-node job gets)."""
    from hpcbench.rundir import RunDir

    rd = RunDir.open(run)
    p = next(p for p in rd.points() if (p.nodes, p.ranks_per_node) == (nodes, rpn))
    rec = json.loads(rd.point(p).result.read_text())
    return next(r["slurm_node"] for r in rec["ranks"] if r["rank"] == rank)


@pytest.mark.slurm
def test_straggler_oversubscription_and_one_host_on_slurm(cli, tmp_path, slurm_cluster):
    sweep = write(tmp_path / "s.toml", SWEEP.format(name="faults", bind="sockets", slow=1, nodes="[1, 2]",
                                                     rpn="[1, 2]"))
    run = tmp_path / "run"
    sweep_ok(cli, sweep, run)
    found = _rules(run)
    # the straggler: rank 1 sleeps 150 ms a step; the finding names that rank and its Slurm node
    for nodes, rpn in ((2, 1), (1, 2), (2, 2)):
        node = _node_of_rank(run, nodes, rpn, 1)
        s = found[(nodes, rpn)]["straggler"]
        assert s.claim.startswith(f"rank 1 on {node} takes 15") and "ms per compute, the other ranks" in s.claim
        assert s.evidence == "result.json rank_compute_s" and s.cost > 0.5, (nodes, rpn, s)
    assert "straggler" not in found[(1, 1)]  # one rank: nobody to wait for
    # oversubscription: 2 ranks x 1 CPU on a node with fewer CPUs of its own (a minicluster node of a 2-core host
    # has one: its cpuset); where a node has 2 or more, nothing is oversubscribed
    per_node = _node_cpus(run, 2, 2)
    for key in ((1, 2), (2, 2)):
        if per_node < 2:
            over = found[key]["oversubscribed"]
            assert f"ask for 2 CPUs (2 x 1 on {_node_of_rank(run, *key, 0)}), and it has {per_node}" in over.claim
            assert f"{2 / per_node:.1f}x oversubscribed" in over.claim
        else:
            assert "oversubscribed" not in found[key]
    assert all("oversubscribed" not in found[k] for k in ((1, 1), (2, 1)))  # 1 CPU asked of each node
    # one host posing as two nodes: told apart by the kernel's boot id, whatever the nodes' hostnames
    assert all("one-host" in found[k] for k in ((2, 1), (2, 2)))
    # each node its own CPU (the cluster's cpusets): a caveat, not a cause; the CPUs are the ranks' affinities
    one = found[(2, 1)]["one-host"]
    assert one.severity == "info" and one.claim == (
        "2 nodes in separate network namespaces of one host: the links are real but unshaped (a veth moves bytes as "
        "fast as the CPUs copy them); each node has CPUs of its own (node1: CPU 0; node2: CPU 1); memory and the "
        "kernel are shared")
    assert all("one-host" not in found[k] for k in ((1, 1), (1, 2)))
    # compute that grows with ranks per node is measured on the median rank, not on the straggler
    assert "compute-growth" not in found[(1, 2)]
    # nodes of their own cores: one rank per node never shares a CPU with the other node's
    cpus = _affinities(run, 2, 1)
    if cpus[0] == cpus[1]:
        listed = ",".join(map(str, cpus[0]))
        assert found[(2, 1)]["shared-cores"].claim.endswith(f"run 2 threads on the same {len(cpus[0])} CPU(s) ({listed})")
    else:
        assert "shared-cores" not in found[(2, 1)], cpus
    # ... while a socket binding that gives the node's two ranks its CPUs is by design: silent
    assert "shared-cores" not in found[(1, 1)]
    assert all("binding" not in f for f in found.values())  # every affinity matched what Slurm was asked
    # the report's Why section leads with the costliest finding of each point
    report = cli("summarize", str(run), "--out", str(tmp_path / "rep"), "--no-plots", "--no-history")
    assert report.returncode == 0, report.stderr
    why = (tmp_path / "rep" / "report.md").read_text().split("## Why", 1)[1].split("\n## ", 1)[0]
    assert "rank 1 on node2 takes" in why
    doc = json.loads(cli("explain", str(run), "--format", "json").stdout)
    assert {d["point"] for d in doc["points"]} == {w.point.label for w in explain_paths([run])}


@pytest.mark.slurm
def test_unbound_ranks_share_cores(cli, tmp_path, slurm_cluster):
    sweep = write(tmp_path / "s.toml", SWEEP.format(name="unbound", bind="none", slow=-1, nodes="[1]", rpn="[2]"))
    run = tmp_path / "run"
    sweep_ok(cli, sweep, run)
    found = _rules(run)[(1, 2)]
    shared = found["shared-cores"]
    assert shared.claim.startswith(f"2 ranks on {_node_of_rank(run, 1, 2, 0)} are not bound")
    assert "provenance-rank0.json affinity" in shared.evidence and "cpu_bind" in shared.fix
    assert ("oversubscribed" in found) == (_node_cpus(run, 1, 2) < 2)  # a node with one core of its own
    # a rank the kernel moved may lag: that is the unbound sharing's doing, said under it
    assert "straggler" not in found or found["straggler"].because in ("shared-cores", "oversubscribed")


@pytest.mark.slurm
def test_an_injected_straggler_on_shared_cores_is_named_first(cli, tmp_path, slurm_cluster):
    """Two unbound ranks of one node share its CPUs and rank 1 sleeps 150 ms a step: shared cores explain a lag
    of a few compute times, not 150 ms, so the straggler is its own cause and explain names it first, with the
    shared cores after it (it was once hidden behind them)."""
    sweep = write(tmp_path / "s.toml", SWEEP.format(name="lag", bind="none", slow=1, nodes="[1]", rpn="[2]"))
    run = tmp_path / "run"
    sweep_ok(cli, sweep, run)
    [w] = explain_paths([run])
    first = w.findings[0]
    assert first.rule == "straggler" and first.own_cause and first.because is None, w.findings
    assert first.claim.startswith("rank 1 on node") and "slow_rank" in first.fix
    # the node's CPUs shared by its two ranks: shared cores, or oversubscribed where the node has one CPU of its own
    assert {"shared-cores", "oversubscribed"} & {f.rule for f in w.top()}, w.top()
    out = cli("explain", str(run))
    assert out.returncode == 0 and out.stdout.splitlines()[1].startswith("1. straggler ("), out.stdout
    # The fix names the hunt of that node; a hunt beside the run (RUNS_ROOT/hunt-*/hunt.json) is then cited.
    node = first.claim.split()[3]
    assert f"hpcbench hunt --nodes {node}" in first.fix and "--exclude-nodes @" in first.fix, first.fix
    _write_hunt(tmp_path / "hunt-1", node)
    out = cli("explain", str(run), "--format", "json")
    assert f"the hunt {tmp_path / 'hunt-1' / 'hunt.json'} named {node} (link: " in out.stdout, out.stdout


def _write_hunt(out, node: str) -> None:
    """A hunt record as `hpcbench hunt` writes it, from the decision over four nodes' pair timings where every
    pair of ``node`` is slow."""
    from hpcbench.hunt import record
    from hpcbench.hunt.decide import PairTest, decide
    from hpcbench.hunt.run import Allocation, Hunt, HuntSettings

    others = [f"x{i}" for i in range(3)]
    names = (node, *others)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    tests = [PairTest(a, b, tuple(x * (0.2 if node in (a, b) else 1.0) for x in (20e6, 21e6, 19e6))) for a, b in pairs]
    record.write(Hunt(HuntSettings(nodes=names), Allocation("1", names, own=True), decide(tests), tests), out)


@pytest.mark.torch
def test_local_backend_with_two_nodes_is_one_host(cli, tmp_path):
    sweep = write(tmp_path / "s.toml", SWEEP.format(name="local", bind="none", slow=-1, nodes="[2]", rpn="[1]"))
    run = tmp_path / "run"
    sweep_ok(cli, sweep, run, backend="local")
    found = _rules(run)[(2, 1)]
    assert "asked for 2 nodes, but its ranks ran on 1 host" in found["one-host"].claim
    assert found["one-host"].evidence == "result.json ranks[].hostname"


@pytest.mark.torch
def test_input_bound_on_real_mnist_files(cli, tmp_path):
    """MNIST read from its real IDX files, decoded sample by sample, feeding a model that computes almost
    nothing: the step waits for its batch, and explain says how much; synthetic data stays silent."""
    from test_train import write_mnist

    write_mnist(tmp_path / "mnist", n_train=512)
    found = {}
    for data in ("mnist", "synthetic"):
        sweep = write(tmp_path / f"{data}.toml", f"""
[workload]
data = "{data}"
data_dir = "{tmp_path / 'mnist'}"
model = "mlp"
batch_size = 128
steps = 6
warmup_steps = 1
[matrix]
ranks_per_node = [1]
""")
        run = tmp_path / f"run-{data}"
        sweep_ok(cli, sweep, run, backend="local")
        [w] = explain_paths([run])
        found[data] = ({f.rule: f for f in w.findings}, w.point)
    rules, p = found["mnist"]
    rec = p.record  # the measured repeat's record, as explain read it
    assert rec.input_fraction > 0.10, rec.input_fraction  # decoding 128 images against a 784-128-10 MLP
    assert rules["input"].claim == f"each step waits {rec.input_fraction:.0%} of its time for its batch: the input " \
                                   "pipeline cannot keep up"
    assert rules["input"].evidence == "result.json input_fraction" and rules["input"].cost == rec.input_fraction
    assert "input" not in found["synthetic"][0]
