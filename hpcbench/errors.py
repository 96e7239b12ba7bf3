"""One exception family. The CLI prints ``error: <message>`` (plus a hint) and exits 2."""

from __future__ import annotations


class HpcbenchError(Exception):
    """An error the user can act on. ``hint`` says what to do about it."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


class ConfigError(HpcbenchError):
    """A sweep file or command-line value is wrong."""


class SchemaError(HpcbenchError):
    """A record has an unknown schema name or version."""


class SchedulerError(HpcbenchError):
    """The scheduler refused or failed a request."""


class ClusterError(HpcbenchError):
    """The local mini cluster could not be started, stopped or queried."""


class RunDirBusy(HpcbenchError):
    """Another hpcbench holds the run directory's lock."""
