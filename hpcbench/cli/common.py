"""What every verb module shares: the output helper and the reading of a --cluster argument."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import overload

Args = argparse.Namespace


def echo(line: str) -> None:
    print(line, flush=True)


@overload
def profile_arg(value: str) -> str: ...


@overload
def profile_arg(value: None) -> None: ...


def profile_arg(value: str | None) -> str | None:
    """--cluster: a profile name, or a path. A path typed on the command line is relative to the current
    folder, as in any tool; only paths written inside a TOML file are relative to that file."""
    if value and (value.endswith(".toml") or "/" in value):
        return str(Path(value).resolve())
    return value
