"""The one declaration of every measurement parameter (plan/fields.py): each use is derived from it.

Every test here walks the declaration itself, so a parameter added tomorrow is covered without
touching this file: it must reach the ranks of each workload it applies to, change the point id
exactly there, be read by the workload code, be a [workload] key (or an axis), and be a column of
the records.
"""
from __future__ import annotations

import ast
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

from hpcbench.errors import ConfigError
from hpcbench.figures.samples import from_record
from hpcbench.plan.expand import Point, expand, point_id
from hpcbench.plan.fields import AXES, PARAMS, WORKLOAD_KEYS, Param
from hpcbench.plan.spec import parse
from hpcbench.report.tidy import TIDY_COLUMNS, tidy_row
from hpcbench.submit.launch import plan_launch
from hpcbench.vocab import BACKENDS, COLLECTIVES, DATA, DEVICES, DTYPES, FRAMEWORKS, KINDS, MODELS, SCALING
from hpcbench.workloads.config import CONFIGS, MODULE

# Words a string parameter might take; the parameter's own checker says which it accepts.
_WORDS = (*FRAMEWORKS, *BACKENDS, *MODELS, *DEVICES, *DATA, *SCALING, *DTYPES, *KINDS, *COLLECTIVES, "/scratch/data")


def other_value(p: Param, current: Any = None) -> Any:
    """A valid value of ``p`` other than its default and ``current``, found by asking the parameter's own check."""
    if p.type is bool:
        candidates: tuple[Any, ...] = (not p.default,)
    elif p.type is float:
        candidates = (p.default * 3,)
    elif p.type is int:
        base = p.default if p.default is not None else 1
        candidates = (base + 1, base * 2 + 2, 64, "64K")
    else:
        candidates = _WORDS
    valid = []
    for v in (*candidates, p.default):
        try:
            valid.append(p.check(v, "x"))
        except ConfigError:
            continue
    # Prefer a value that is neither the default nor the current one; a choice of two allows only the other.
    for v in [v for v in valid if v not in (p.default, current)] + [v for v in valid if v != current]:
        return v
    raise AssertionError(f"no valid value of {p.name} other than {current!r}")


def base_point(kind: str) -> Point:
    params = {p.name: p.default for p in PARAMS}
    params.update(kind=kind, nodes=2, ranks_per_node=2)
    return Point(id=point_id(params), label=f"{kind}-test", **params)


def rank_argv(point: Any, point_dir: str, python: str) -> list[str]:
    """The rank command of the point's launch plan (the [slurm] settings do not change it)."""
    return list(plan_launch(parse("", "x.toml"), point, point_dir, python).rank_argv)


CASES = [(p, kind) for p in PARAMS for kind in sorted(p.kinds)]


@pytest.mark.parametrize("param,kind", CASES, ids=[f"{p.name}-{k}" for p, k in CASES])
def test_every_parameter_reaches_the_ranks_of_every_workload_it_applies_to(param, kind, tmp_path):
    """Through the job script's own argv: rank_argv -> the workload's argument parser."""
    start = base_point(kind)
    value = other_value(param, getattr(start, param.name))
    point = replace(start, **{param.name: value})
    argv = rank_argv(point, str(tmp_path), "python3")
    assert argv[:4] == ["python3", "-u", "-m", MODULE[point.kind]]
    cfg = CONFIGS[point.kind].from_argv(argv[4:])
    if param.ranks:
        assert getattr(cfg, param.name) == value, f"{param.name}={value!r} did not reach the {kind} ranks"
        assert cfg.params()[param.name] == value  # ... and the record keeps it
    else:  # the job itself uses it (counts, which module runs, the repeat): never a rank flag
        assert param.name not in {f.name for f in fields(cfg)}


@pytest.mark.parametrize("param", PARAMS, ids=[p.name for p in PARAMS])
def test_a_parameter_changes_the_id_exactly_where_it_applies(param):
    for kind in KINDS:
        values = base_point(kind).params()
        changed = {**values, param.name: other_value(param, values[param.name])}
        assert (point_id(changed) != point_id(values)) == param.applies(kind), (param.name, kind)


def _read_attributes() -> set[str]:
    """Every attribute the workload code reads off a rank config (``cfg.x`` or ``self.cfg.x``)."""
    names = set()
    for f in (REPO / "hpcbench" / "workloads").glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Attribute):
                owner = node.value
                if (isinstance(owner, ast.Name) and owner.id == "cfg") or \
                        (isinstance(owner, ast.Attribute) and owner.attr == "cfg"):
                    names.add(node.attr)
    return names


def test_every_parameter_the_ranks_get_is_read_by_a_workload():
    read = _read_attributes()
    unread = sorted({p.name for p in PARAMS if p.ranks} - read)
    assert not unread, f"declared, passed to the ranks, but never read by hpcbench/workloads: {unread}"


def test_workload_keys_and_axes_are_checked_with_the_declared_check():
    for name in WORKLOAD_KEYS:
        with pytest.raises(ConfigError, match=rf"x.toml: workload\.{name}: "):
            parse(f"[workload]\n{name} = {{ bad = 1 }}\n", "x.toml")
    for name in AXES:
        with pytest.raises(ConfigError, match=rf"x.toml: matrix\.{name}"):
            parse(f"[matrix]\n{name} = [{{ bad = 1 }}]\n", "x.toml")
    spec = parse("", "x.toml")
    for p in PARAMS:
        if p.where == "workload":
            assert getattr(spec.workload, p.name) == p.default


def test_init_timeout_reaches_the_allreduce_ranks(tmp_path):
    """The drift this declaration ended: the sweep's init_timeout_s changed an allreduce point's id but the
    ranks kept a timeout of their own (300 s)."""
    spec = parse('[workload]\nkind = "collective"\ninit_timeout_s = 42\n', "x.toml")
    [point] = expand(spec)
    argv = rank_argv(point, str(tmp_path), "python3")
    assert argv[argv.index("--init-timeout-s") + 1] == "42"
    assert CONFIGS["collective"].from_argv(argv[4:]).init_timeout_s == 42
    default = expand(parse('[workload]\nkind = "collective"\n', "x.toml"))[0]
    assert CONFIGS["collective"].from_point(default, "d").init_timeout_s == 600  # the declared default
    assert default.id != point.id


def test_the_record_reader_and_the_records_carry_every_parameter(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from report_helpers import point, record

    p = point(rpn=2)
    rec = record(p, 100.0, params={**CONFIGS["train"].from_point(p, "d").params(), "steps": 7, "lr": 0.5})
    s = from_record(rec, "run")
    assert (s.steps, s.lr, s.ranks_per_node, s.model) == (7, 0.5, 2, "mlp")
    row = tidy_row(s)
    assert all(p.name in TIDY_COLUMNS for p in PARAMS)
    assert (row["steps"], row["lr"], row["init_timeout_s"]) == (7, 0.5, 600)


def test_the_python_api_gives_every_parameter_as_a_column(tmp_path):
    import sys

    import hpcbench

    sys.path.insert(0, str(Path(__file__).parent))
    from report_helpers import make_run, point, record

    a, b = point(), point(rpn=2)
    rd = make_run(tmp_path / "run", [(a, record(a, 100.0)), (b, "boom")])
    df = hpcbench.load(rd.root)
    assert list(df.columns) == list(TIDY_COLUMNS) and len(df) == 2
    assert {p.name for p in PARAMS} <= set(df.columns)
    done, failed = df.set_index("ranks_per_node").loc[1], df.set_index("ranks_per_node").loc[2]
    assert (done["state"], done["throughput"], done["steps"]) == ("COMPLETED", 100.0, 4)
    assert failed["state"] == "FAILED" and "boom" in failed["reason"]
