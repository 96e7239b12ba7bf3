"""The classes written from plan/fields.py (plan/codegen.py): checked in, exactly what the declaration gives,
one field per declared name with its default, and seen by mypy, so that a misspelt field is a type error."""
from __future__ import annotations

import shutil
from dataclasses import MISSING, fields, replace

import pytest
from conftest import REPO
from mypy import api as mypy_api

from hpcbench.figures._generated import SampleParams
from hpcbench.plan import codegen
from hpcbench.plan.expand import Point
from hpcbench.plan.fields import PARAMS, SLURM, SWEEP, WORKLOAD_KEYS, rank_params
from hpcbench.plan.point import EXTRA
from hpcbench.plan.spec import SlurmSettings, SweepInfo, Workload
from hpcbench.vocab import KINDS
from hpcbench.workloads.config import CONFIGS


@pytest.mark.parametrize("rel", sorted(codegen.FILES))
def test_the_checked_in_file_is_what_the_declaration_gives(rel):
    text = (codegen.PACKAGE / rel).read_text()
    assert text == codegen.FILES[rel](), f"hpcbench/{rel} is out of date: run `{codegen.COMMAND}`"


def test_a_changed_declaration_makes_the_files_out_of_date_and_the_command_rewrites_them(tmp_path, monkeypatch,
                                                                                           capsys):
    root = tmp_path / "hpcbench"
    for rel in codegen.FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(codegen.PACKAGE / rel, root / rel)
    assert codegen.stale(root) == []
    steps = next(p for p in PARAMS if p.name == "steps")
    changed = tuple(replace(p, default=21, unknown=0) if p is steps else p for p in PARAMS)
    monkeypatch.setattr(codegen, "PARAMS", changed)
    monkeypatch.setattr(codegen, "rank_params", lambda kind: tuple(p for p in changed if p.applies(kind) and p.ranks))
    monkeypatch.setattr(codegen, "PACKAGE", root)
    assert codegen.stale(root) == ["plan/_generated.py", "workloads/_configs.py", "figures/_generated.py"]
    assert codegen.main(["--check"]) == 1
    assert f"run: {codegen.COMMAND}" in capsys.readouterr().err
    assert codegen.main([]) == 0
    assert codegen.stale(root) == [] and "    steps: int = 21\n" in (root / "workloads/_configs.py").read_text()
    assert "    steps: int | None = 0\n" in (root / "figures/_generated.py").read_text()


def _fields(cls: type) -> list[tuple[str, object]]:
    return [(f.name, f.default if f.default is not MISSING else ...) for f in fields(cls)]


def test_each_class_has_one_field_per_declared_name_with_its_default():
    assert _fields(SweepInfo) == [(s.name, s.default) for s in SWEEP]
    assert _fields(SlurmSettings) == [(s.name, s.default) for s in SLURM]
    assert _fields(Workload) == [(p.name, p.default) for p in PARAMS if p.name in WORKLOAD_KEYS]
    assert _fields(Point) == [("id", ...), ("label", ...), *((p.name, p.default) for p in PARAMS),
                              *((name, ()) for name in EXTRA)]
    assert _fields(SampleParams) == [(p.name, p.unknown) for p in PARAMS]
    assert sorted(CONFIGS) == sorted(KINDS)
    for kind, cls in CONFIGS.items():
        assert cls.kind == kind
        assert _fields(cls) == [("out", ...), ("point_id", ...), ("label", ...),
                                *((p.name, p.default) for p in rank_params(kind))]


SNIPPET = '''
from hpcbench.plan.expand import Point
from hpcbench.plan.spec import load
from hpcbench.workloads.config import TrainConfig
from hpcbench.figures.aggregate import Agg
from hpcbench.figures.samples import Sample

def use(p: Point) -> None:
    nodes: int = p.nodes
    time: str = load("x.toml").slurm.time
    steps: int = TrainConfig.from_argv([]).steps
    print(nodes, time, steps)
    print(p.batchsize)
    print(load("x.toml").slurm.partion)
    print(TrainConfig.from_argv([]).stepz)
    steps = p.steps  # None on a point whose kind has no steps

def report(a: Agg, s: Sample) -> None:
    print(a.framwork, s.colective)
    world: int = a.world_size  # None where a foreign log does not say
'''


def test_mypy_sees_a_misspelt_field_and_a_parameter_that_may_be_unset(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # where mypy finds hpcbench
    out, err, rc = mypy_api.run(["--config-file", str(REPO / "setup.cfg"), "--cache-dir", str(tmp_path / "cache"),
                                 "--follow-imports=silent", "-c", SNIPPET])
    errors = [line.split(": error: ")[1] for line in out.splitlines() if ": error: " in line]
    assert rc == 1, out + err
    assert errors == [
        '"Point" has no attribute "batchsize"; maybe "batch_size"?  [attr-defined]',
        '"SlurmSettings" has no attribute "partion"; maybe "partition"?  [attr-defined]',
        '"TrainConfig" has no attribute "stepz"; maybe "steps"?  [attr-defined]',
        'Incompatible types in assignment (expression has type "int | None", variable has type "int")  [assignment]',
        '"Agg" has no attribute "framwork"  [attr-defined]',
        '"Sample" has no attribute "colective"  [attr-defined]',
        'Incompatible types in assignment (expression has type "int | None", variable has type "int")  [assignment]',
    ], out
