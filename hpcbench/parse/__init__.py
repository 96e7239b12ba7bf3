"""Log intelligence: NCCL, nccl-tests, Horovod and hpcbench records from any log (``hpcbench parse``)."""

from __future__ import annotations

from typing import Any


def parse_file(path: Any) -> dict[str, Any]:
    from hpcbench.parse.api import parse_file as _parse_file

    return _parse_file(path)


def read_log(path: Any) -> Any:
    """parse_file's facts and the lines that show them (hpcbench.parse.api.Log)."""
    from hpcbench.parse.api import read_log as _read_log

    return _read_log(path)


__all__ = ["parse_file", "read_log"]
