from __future__ import annotations

from conftest import REPO

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
