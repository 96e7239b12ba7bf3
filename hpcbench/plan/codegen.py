"""Writes the classes that plan/fields.py declares as source a type checker reads: the [sweep], [slurm]
and [workload] settings and the Point (plan/_generated.py), each workload kind's rank config
(workloads/_configs.py), and a report row's parameters and a point's view of its first repeat
(figures/_generated.py). A misspelt field is then an error mypy shows, not an AttributeError at run time.

    python -m hpcbench.plan.codegen          # rewrite the files after editing fields.py
    python -m hpcbench.plan.codegen --check  # exit 1 naming the files that are out of date

The declaration stays the one place a parameter is written; tests/test_codegen.py fails, naming the
command above, when a generated file differs from what the declaration gives.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hpcbench.plan.fields import ALL_KINDS, PARAMS, SLURM, SWEEP, Param, Setting, rank_params
from hpcbench.vocab import KINDS

PACKAGE = Path(__file__).resolve().parents[1]
SAMPLES = PACKAGE / "figures/samples.py"  # where the Sample's own fields are written (VIEW_EXTRA's types)
COMMAND = "python -m hpcbench.plan.codegen"
HEADER = (f"# Generated from hpcbench/plan/fields.py by `{COMMAND}`: do not edit; change the declaration\n"
          "# there and run it again (tests/test_codegen.py checks that this file is what it gives).\n")
# (name, docstring, [sweep]/[slurm] settings) of the section classes, in the order they are written
SECTIONS = (
    ("SweepInfo", "[sweep]: the study's name, description and repeats.", SWEEP),
    ("SlurmSettings", "[slurm]: how each job is submitted (never in a point's id).", SLURM),
)
# The Point's fields that are not parameters (plan/point.py's EXTRA): its own axes of other kinds.
POINT_EXTRA = (("env", "tuple[tuple[str, str], ...]"), ("slurm", "tuple[tuple[str, Any], ...]"),
               ("job", "tuple[tuple[str, Any], ...]"))


def type_text(t: Any) -> str:
    """``int`` -> 'int'; ``str | None`` and ``tuple[str, ...]`` as written."""
    if isinstance(t, (types.GenericAlias, types.UnionType)):
        return repr(t)
    return str(t.__name__)


def literal(value: Any) -> str:
    """A default as source; it must read back as the same value."""
    text = json.dumps(value) if isinstance(value, str) else repr(value)
    if ast.literal_eval(text) != value:
        raise ValueError(f"{value!r} has no literal that reads back as itself: give the field a plain default")
    return text


def _class(name: str, doc: str, fields: Iterable[tuple[str, str, Any]], base: str = "",
           head: tuple[str, ...] = ()) -> list[str]:
    """A frozen dataclass; ``fields`` are (name, type text, default), a default of ... for a required field."""
    lines = ["", "", "@dataclass(frozen=True)", f"class {name}{f'({base})' if base else ''}:", f'    """{doc}"""', ""]
    lines += [f"    {line}" if line else "" for line in head]
    lines += [f"    {n}: {t}" if d is ... else f"    {n}: {t} = {literal(d)}" for n, t, d in fields]
    return lines


def _param_type(p: Param) -> str:
    """A Point's field: None where its parameter does not apply to the point's kind (expand._resolve)."""
    if p.optional or p.kinds != ALL_KINDS:
        return f"{type_text(p.type)} | None"
    return type_text(p.type)


def _settings(settings: Iterable[Setting]) -> list[tuple[str, str, Any]]:
    return [(s.name, type_text(s.type), s.default) for s in settings]


def plan_source() -> str:
    lines = [HEADER + '"""The [sweep], [slurm] and [workload] settings and the Point, one field per declared '
             'parameter or setting."""', "", "from __future__ import annotations", "",
             "from dataclasses import dataclass", "from typing import Any", "",
             "from hpcbench.plan.point import PointMethods"]
    for name, doc, settings in SECTIONS:
        lines += _class(name, doc, _settings(settings))
    workload = [(p.name, type_text(p.annotation), p.default) for p in PARAMS if p.where == "workload"]
    lines += _class("Workload", "[workload]: every rank's measurement parameters; the matrix defaults.", workload)
    point = [("id", "str", ...), ("label", "str", ...), *((p.name, _param_type(p), p.default) for p in PARAMS),
             *((n, t, ()) for n, t in POINT_EXTRA)]
    lines += _class("Point", "One job: a fully resolved set of measurement parameters (one field per declared "
                    "parameter).", point, base="PointMethods")
    return "\n".join(lines) + "\n"


def config_class(kind: str) -> str:
    return f"{kind.capitalize()}Config"


def configs_source() -> str:
    lines = [HEADER + '"""Each workload kind\'s rank config: the point\'s folder, id and label (RankConfig), and '
             'every\ndeclared parameter that applies to the kind and reaches its ranks."""', "",
             "from __future__ import annotations", "", "from dataclasses import dataclass", "",
             "from hpcbench.workloads.rankconfig import RankConfig"]
    for kind in KINDS:
        fields = [(p.name, type_text(p.annotation), p.default) for p in rank_params(kind)]
        lines += _class(config_class(kind), f"What each rank of a point of kind {literal(kind)} runs with.", fields,
                        base="RankConfig", head=(f"kind = {literal(kind)}", ""))
    table = ", ".join(f"{literal(kind)}: {config_class(kind)}" for kind in KINDS)
    names = ", ".join(literal(name) for name in ("CONFIGS", *(config_class(kind) for kind in KINDS)))
    lines += ["", "", f"CONFIGS: dict[str, type[RankConfig]] = {{{table}}}", f"__all__ = [{names}]"]
    return "\n".join(lines) + "\n"


def _sample_type(p: Param) -> str:
    """A Sample's field: the Point's type, or None too where a source may not show it (its ``unknown``)."""
    text = _param_type(p)
    return text if p.unknown is not None or text.endswith(" | None") else f"{text} | None"


# The Sample's fields beside the parameters that are the same in every repeat of a point: figures.aggregate's Agg
# reads them, and the parameters, from its first repeat (PointView). Their types are read from figures/samples.py.
VIEW_EXTRA = ("source", "label", "point_id", "world_size", "cluster", "comm_method", "layout", "precision", "env",
              "slurm")


def sample_annotations(source: str) -> dict[str, str]:
    """The annotation of each field and property of the class Sample in ``source`` (figures/samples.py), as
    written: read from the text, so that plan/ imports nothing downstream."""
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Sample")
    out = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = ast.unparse(node.annotation)
        elif isinstance(node, ast.FunctionDef) and node.returns is not None:
            out[node.name] = ast.unparse(node.returns)
    return out


def figures_source() -> str:
    lines = [HEADER + '"""A report row\'s parameters (SampleParams: each as a source shows it, else its ``unknown``) '
             "and\na point's view of them (PointView: read from its first repeat, the same in every repeat).\"\"\"",
             "", "from __future__ import annotations", "", "from dataclasses import dataclass",
             "from typing import TYPE_CHECKING, Any", "", "if TYPE_CHECKING:  # samples.py imports this module",
             "    from hpcbench.figures.samples import Sample", "", "", "@dataclass(kw_only=True)",
             "class SampleParams:", '    """One field per declared parameter."""', ""]
    lines += [f"    {p.name}: {_sample_type(p)} = {literal(p.unknown)}" for p in PARAMS]
    types = {p.name: _sample_type(p) for p in PARAMS} | sample_annotations(SAMPLES.read_text())
    lines += ["", "", "class PointView:", '    """A point\'s parameters and origin: its first repeat\'s."""', "",
              "    samples: list[Sample]"]
    for name in (*(p.name for p in PARAMS), *VIEW_EXTRA):
        lines += ["", "    @property", f"    def {name}(self) -> {types[name]}:",
                  f"        return self.samples[0].{name}"]
    return "\n".join(lines) + "\n"


FILES: dict[str, Callable[[], str]] = {"plan/_generated.py": plan_source, "workloads/_configs.py": configs_source,
                                       "figures/_generated.py": figures_source}


def stale(root: Path = PACKAGE) -> list[str]:
    """The generated files (relative to the package) whose text is not what the declaration gives."""
    return [rel for rel, source in FILES.items()
            if not (root / rel).is_file() or (root / rel).read_text() != source()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=COMMAND, description="Write the classes plan/fields.py declares.")
    ap.add_argument("--check", action="store_true", help="only say which files are out of date (exit 1 if any)")
    args = ap.parse_args(argv)
    out = stale()
    if args.check:
        for rel in out:
            print(f"out of date: hpcbench/{rel} (run: {COMMAND})", file=sys.stderr)
        return 1 if out else 0
    for rel in out:
        (PACKAGE / rel).write_text(FILES[rel]())
        print(f"wrote hpcbench/{rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
