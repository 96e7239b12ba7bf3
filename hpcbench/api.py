"""The Python API: the results of runs and logs as pandas DataFrames, from the same code the CLI runs.

    import hpcbench
    df = hpcbench.load("runs/scaling-20261122T101500Z")   # one row per point x repeat

Every declared measurement parameter (plan/fields.py) is a column, and so is each environment variable
(env.NAME) and [slurm] setting a sweep varies, next to the state, the reason and the measured figures
(the columns of records.csv).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def _frame(samples: Iterable[Any]) -> Any:
    import pandas as pd

    from hpcbench.report.samples import tidy_columns, tidy_row

    samples = list(samples)
    return pd.DataFrame([tidy_row(s) for s in samples], columns=list(tidy_columns(samples)))


def load(*paths: str | Path, cluster: str | None = None) -> Any:
    """Run directories, folders of runs, or log files -> a DataFrame, one row per point x repeat.

    Failed, missing and unparsable points are rows too, with their ``state`` and ``reason``.
    """
    from hpcbench.report.inputs import load as load_inputs

    return _frame(load_inputs(list(paths), cluster).samples)
