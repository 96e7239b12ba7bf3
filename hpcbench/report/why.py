"""`hpcbench explain`: the points of runs and logs, aggregated and given their baselines as the report does,
then explained (hpcbench.explain)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def explain_paths(paths: list[str | Path], baseline: str = "auto", cluster: str | None = None,
                  allreduce_file: str | Path | None = None) -> list[Any]:
    from hpcbench.explain import explain
    from hpcbench.report import baseline as baseline_mod
    from hpcbench.report.aggregate import aggregate
    from hpcbench.report.inputs import load

    if allreduce_file is not None and not Path(allreduce_file).is_file():
        from hpcbench.errors import NoSuchFile

        raise NoSuchFile(allreduce_file, "allreduce log")
    aggs = aggregate(load(list(paths), cluster).samples)
    baseline_mod.apply(aggs, baseline)
    return explain(aggs, allreduce_file)
