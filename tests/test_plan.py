from __future__ import annotations

from conftest import REPO, write

from hpcbench.plan.expand import expand
from hpcbench.plan.spec import load, parse


def test_scaling_matrix_product_minus_excludes():
    points = expand(load(REPO / "sweeps" / "scaling.toml"))
    # 2 backends x 3 node counts x 4 GPU counts, minus gloo at 4 nodes x 8 GPUs
    assert len(points) == 2 * 3 * 4 - 1
    combos = {(p.backend, p.nodes, p.ranks_per_node) for p in points}
    assert ("gloo", 4, 8) not in combos and ("nccl", 4, 8) in combos
    assert all(p.gpus_per_node == p.ranks_per_node and p.device == "cuda" for p in points)
    assert len({p.id for p in points}) == len(points)


def test_ids_are_stable_and_depend_only_on_measurement_parameters():
    text = (REPO / "sweeps" / "scaling.toml").read_text()
    a = [p.id for p in expand(parse(text, "a.toml"))]
    assert a == [p.id for p in expand(parse(text, "elsewhere/b.toml"))]
    # Scheduler settings do not change what is measured, so ids stay...
    assert a == [p.id for p in expand(parse(text.replace('time = "00:20:00"', 'time = "01:00:00"'), "a.toml"))]
    # ...but a measurement parameter does.
    changed = [p.id for p in expand(parse(text.replace("steps = 50", "steps = 60"), "a.toml"))]
    assert not set(a) & set(changed)


def test_exclude_with_scalar_and_list_values_and_repeats():
    spec = parse("""
[sweep]
repeats = 2
[matrix]
nodes = [1, 2]
ranks_per_node = [1, 2]
[[exclude]]
nodes = 2
ranks_per_node = [1]
""", "x.toml")
    points = expand(spec)
    assert [(p.nodes, p.ranks_per_node, p.repeat) for p in points] == [
        (1, 1, 0), (1, 1, 1), (1, 2, 0), (1, 2, 1), (2, 2, 0), (2, 2, 1)]
    assert points[0].label.endswith("-r0") and points[0].id != points[1].id


# Ids as hpcbench gave them before the kind was renamed (kind = "allreduce"), from the same sweep files.
GOLDEN_IDS = {
    "allreduce.toml": {"ddp-gloo-allreduce-n1x2": "1943308459", "ddp-gloo-allreduce-n2x2": "53b8642e6e",
                       "horovod-gloo-allreduce-n1x2": "18c2ad0fc5", "horovod-gloo-allreduce-n2x2": "6a5142b0df",
                       "horovod-mpi-allreduce-n1x2": "6c57e1c186", "horovod-mpi-allreduce-n2x2": "8490c072b7"},
    "collectives.toml": {"ddp-gloo-allreduce-n1x2": "eeca4f40a7", "ddp-gloo-all_gather-n1x2": "2919461b5c",
                         "ddp-gloo-reduce_scatter-n1x2": "7478ca02a7", "ddp-gloo-alltoall-n1x2": "83e5a47fd6"},
}


def test_the_collective_kind_keeps_every_id_its_first_name_gave(capsys):
    for name, golden in GOLDEN_IDS.items():
        text = (REPO / "sweeps" / name).read_text()
        assert 'kind = "collective"' in text
        new = {p.label: p for p in expand(parse(text, name))}
        old = {p.label: p for p in expand(parse(text.replace('kind = "collective"', 'kind = "allreduce"'), name))}
        assert {label: new[label].id for label in golden} == golden
        assert [(p.id, p.kind, p.model) for p in old.values()] == [(p.id, "collective", None) for p in new.values()]
    # the old name still reads, and the note says what to write instead (once per reading, on stderr)
    assert capsys.readouterr().err.count("note: collectives.toml: workload.kind: workload kind 'allreduce' is now "
                                         "called 'collective': write that") == 1


def test_a_plan_written_under_the_kinds_first_name_reads_as_the_collective_kind():
    from hpcbench.plan.expand import Point

    [p] = expand(parse('[workload]\nkind = "collective"\ncollective = "all_gather"\n', "g.toml"))
    old = {**p.to_dict(), "kind": "allreduce", "model": "allreduce"}  # what expand.py wrote into plan.json then
    assert Point.from_dict(old) == p and p.model is None


def test_the_plan_table_shows_the_parameters_that_apply_to_its_kinds(cli, tmp_path):
    """A collective sweep's table names each point's collective and has no empty model or batch column; a training
    sweep's has its model and batch, and no collective column."""
    coll = write(tmp_path / "c.toml", '[workload]\nkind = "collective"\n[matrix]\ncollective = ["all_reduce", "gather"]\n')
    train = write(tmp_path / "t.toml", '[workload]\nmodel = "mlp"\n')
    heads = {}
    for f in (coll, train):
        out = cli("plan", str(f), "--runs-root", str(tmp_path / "runs"))
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        heads[f.stem] = lines[1].split()
        heads[f.stem + "-rows"] = lines[3:5] if f is coll else lines[3:4]
    assert "collective" in heads["c"] and "model" not in heads["c"] and "batch_size" not in heads["c"]
    assert sorted(row.split()[heads["c"].index("collective")] for row in heads["c-rows"]) == ["all_reduce", "gather"]
    assert "model" in heads["t"] and "batch_size" in heads["t"] and "collective" not in heads["t"]
