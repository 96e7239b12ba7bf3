"""`hpcbench explain`: the points of runs and logs, aggregated and given their baselines as the report does
(hpcbench.figures), then explained (hpcbench.explain)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpcbench.explain import PointWhy


def explain_paths(paths: list[str | Path], baseline: str = "auto", cluster: str | None = None,
                  allreduce_file: str | Path | None = None) -> list[PointWhy]:
    from hpcbench.explain import explain
    from hpcbench.explain.inputs import subjects
    from hpcbench.figures import baseline as baseline_mod
    from hpcbench.figures.aggregate import aggregate
    from hpcbench.report.inputs import load

    if allreduce_file is not None and not Path(allreduce_file).is_file():
        from hpcbench.errors import NoSuchFile

        raise NoSuchFile(allreduce_file, "allreduce log")
    aggs = aggregate(load(list(paths), cluster).samples)
    baseline_mod.apply(aggs, baseline)
    return explain(subjects(aggs), allreduce_file)
