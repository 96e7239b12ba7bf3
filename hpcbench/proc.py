"""The one way hpcbench runs an external tool and reads its answer (sbatch, scontrol, nvidia-smi, ...).

``run`` never raises for the tool's sake: a missing command, a time-out and a non-zero exit all come
back as a Ran with ``ok`` False and a one-line ``why``. ``check`` is ``run`` for callers whose
failure is the user's problem: it raises the HpcbenchError subclass they name, with that line.
Every call takes an argv list: no user value ever goes through a shell.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpcbench.errors import HpcbenchError


@dataclass(frozen=True)
class Ran:
    argv: tuple[str, ...]
    returncode: int | None  # None when the command did not run to an exit (missing, or timed out)
    stdout: str = ""
    stderr: str = ""
    problem: str | None = None  # why returncode is None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def missing(self) -> bool:
        return self.problem == "command not found"

    @property
    def output(self) -> str:
        """stdout and stderr together, stripped: what a person would have seen."""
        return (self.stdout + self.stderr).strip()

    def why(self) -> str:
        """One line: what went wrong ('' when nothing did)."""
        if self.problem:
            return f"{self.argv[0]}: {self.problem}"
        if self.ok:
            return ""
        lines = (self.stderr or self.stdout).strip().splitlines()
        return lines[-1] if lines else f"exit {self.returncode}"


def run(argv: Sequence[str], timeout: float = 60, env: Mapping[str, str] | None = None,
        cwd: str | None = None) -> Ran:
    argv = tuple(str(a) for a in argv)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                           env=dict(env) if env is not None else None, cwd=cwd, errors="replace")
    except FileNotFoundError:
        return Ran(argv, None, problem="command not found")
    except PermissionError:
        return Ran(argv, None, problem="not executable")
    except subprocess.TimeoutExpired:
        return Ran(argv, None, problem=f"no answer in {timeout:.0f}s")
    return Ran(argv, p.returncode, p.stdout, p.stderr)


def check(argv: Sequence[str], error: type[HpcbenchError], hint: str | None = None, timeout: float = 60,
          env: Mapping[str, str] | None = None) -> str:
    """stdout of a command that must succeed; else ``error('<cmd> failed: <why>', hint)``."""
    r = run(argv, timeout, env)
    if r.ok:
        return r.stdout
    raise error(r.why() if r.problem else f"{r.argv[0]} failed: {r.why()}", hint)
