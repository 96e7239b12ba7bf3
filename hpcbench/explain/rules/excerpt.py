"""What a log that measured nothing (or not all it started) still says: an nccl-tests header whose rows are not in
the text (an excerpt, not a failed job), a single-rank run, whose figures would measure no link, and a Horovod
run cut before its summary."""

from __future__ import annotations

from hpcbench.explain.context import Context
from hpcbench.findings import Finding
from hpcbench.parse.checks import one_rank
from hpcbench.vocab import INFO, WARNING


def no_rows(ctx: Context) -> list[Finding]:
    tests = [p["nccl_tests"] for p in ctx.parsed if p.get("nccl_tests") is not None]
    if not tests or any(t.get("rows") for t in tests) or ctx.evidence.all("row"):
        return []  # rows in the text that could not be read are rule 'could-not-read''s
    head = ctx.evidence.all("run_header")
    where = str(head[0].line) if head else None
    return [Finding(INFO, "no-rows", "the log holds nccl-tests' header but no data row: the text ends before the "
                    "table, so there is no figure to judge", "paste or attach the whole output, down to 'Avg bus "
                    "bandwidth'", where, subject=ctx.name)]


def single_rank(ctx: Context) -> list[Finding]:
    """A log with no table whose job had one rank (a measured table says it in rule 'busbw')."""
    tests = [p["nccl_tests"] for p in ctx.parsed if p.get("nccl_tests") is not None]
    alone = one_rank(ctx.evidence)
    if alone is None or not tests or any(t.get("rows") for t in tests):
        return []
    return [Finding(WARNING, "busbw", "figures nothing: one rank, so no link is crossed (nccl-tests' busbw of one "
                    "rank is 0 by definition)", "run on two or more GPUs (-g 2, or mpirun -np 2) to measure a link",
                    str(alone.line), subject=ctx.name)]


def unfinished(ctx: Context) -> list[Finding]:
    """A Horovod run after the last summary that printed iterations and no summary: cut, or stopped."""
    out = []
    for p in ctx.parsed:
        run = (p.get("horovod") or {}).get("unfinished")
        if run:
            np = f" (launcher -np {run['launcher_np']})" if run.get("launcher_np") else ""
            out.append(Finding(WARNING, "unfinished", f"a Horovod run{np} printed {run['iterations']} iteration(s), "
                               f"the last at {run['last_img_sec']:g} img/sec, and no 'Total img/sec' summary: it was "
                               "cut short or stopped, so its figures are left out", "read the end of that run's output "
                               "(a failure line, or the paste stopping there)", subject=ctx.name))
    return out


RULES = (no_rows, single_rank, unfinished)
ORDER = 30  # with the figures: what a log without them still says
ON_LOGS_ALONE = True
