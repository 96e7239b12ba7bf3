"""``hpcbench doctor``: is this login node and environment ready to run sweeps? What is missing, and the fix.

Every finding comes from running the real tool (sbatch, sacct, srun --mpi=list, Lmod, the Python
imports) and quoting what it said. Whether the run directory is visible on the compute nodes is
tested by a tiny job that reads a token file there from every node it gets (``--no-job`` falls back
to a filesystem-type heuristic, which cannot see that two nodes share one disk).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcbench import proc
from hpcbench.errors import HOROVOD_BUILD
from hpcbench.findings import Finding
from hpcbench.plan.cluster import ClusterProfile
from hpcbench.vocab import ERROR, OK, WARNING

# Filesystems that compute nodes normally mount from a server (stat -f -c %T / findmnt names).
SHARED_FS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cephfs", "ceph", "wekafs", "panfs", "fuse.glusterfs",
             "glusterfs", "smb2", "cifs", "fuse.sshfs", "orangefs", "vast")


def _login_shell(script: str) -> proc.Ran:
    """Run in ``bash -l`` so the site's module set-up (/etc/profile.d) applies, as in a user's session."""
    return proc.run(["bash", "-lc", script], timeout=60)


def check_slurm() -> list[Finding]:
    out = []
    missing = [c for c in ("sbatch", "squeue", "srun", "scontrol", "sinfo") if shutil.which(c) is None]
    if missing:
        return [Finding(ERROR, "slurm", f"not on PATH: {', '.join(missing)}",
                        "run on a Slurm login node (or load the site's slurm module); without Slurm use "
                        "--backend local")]
    version = proc.run(["sinfo", "--version"]).output
    ran = proc.run(["scontrol", "ping"])
    ping = ran.output or ran.why()
    if not ran.ok or "UP" not in ping:
        out.append(Finding(ERROR, "slurm", f"{version}; slurmctld does not answer: {ping}",
                           "ask the admins; on the local test cluster: sudo hpcbench minicluster up"))
    else:
        out.append(Finding(OK, "slurm", f"{version}; sbatch, squeue, srun on PATH; {ping.splitlines()[0]}"))
    out.append(check_accounting())
    return out


def check_accounting() -> Finding:
    if shutil.which("sacct") is None:
        return Finding(WARNING, "accounting", "sacct not on PATH",
                       "install Slurm's client tools; hpcbench reads squeue and the point folders meanwhile")
    ran = proc.run(["sacct", "--noheader", "-X", "--starttime=now-1hours", "--format=JobID"])
    if ran.ok:
        return Finding(OK, "accounting", "sacct answers (job history and exit states available)")
    said = ran.why()
    return Finding(WARNING, "accounting", f"sacct fails: {said}",
                   "not required: hpcbench takes live state from squeue and how a job ended from its folder; "
                   "for sacct history the admins enable slurmdbd (AccountingStorageType=accounting_storage/slurmdbd)")


def mpi_plugins() -> tuple[list[str], str]:
    """The plugin names ``srun --mpi=list`` prints, and its raw text."""
    ran = proc.run(["srun", "--mpi=list"])
    text = ran.output or ran.why()
    if not ran.ok:
        return [], text
    names = []
    for line in text.splitlines():
        line = line.strip()
        if re.fullmatch(r"(srun: +)?[A-Za-z0-9_]+", line):
            names.append(line.split()[-1])
        m = re.match(r"specific pmix plugin versions available: (.*)", line)
        if m:
            names += [v.strip() for v in m.group(1).split(",") if v.strip()]
    return names, text


def check_mpi(profile: ClusterProfile | None) -> Finding:
    names, text = mpi_plugins()
    want = profile.get("mpi") if profile else None
    if not names:
        return Finding(ERROR if want else WARNING, "srun --mpi", f"srun --mpi=list gave no plugins: {text}",
                       "ask the admins which PMI Slurm was built with")
    if profile and want and want not in names:
        return Finding(ERROR, "srun --mpi", f"profile asks for --mpi={want}; srun offers: {', '.join(names)}",
                       f"set mpi to one of {', '.join(names)} in {profile.source}")
    conf = proc.run(["scontrol", "show", "config"]).output
    default = re.search(r"^MpiDefault\s*=\s*(\S+)", conf, re.MULTILINE)
    extra = f"; MpiDefault={default.group(1)}" if default else ""
    uses = f"; profile uses --mpi={want}" if want else ""
    return Finding(OK, "srun --mpi", f"plugins: {', '.join(names)}{extra}{uses}")


def check_partition(profile: ClusterProfile | None) -> Finding | None:
    part = profile.get("partition") if profile else None
    if profile is None or not part:
        return None
    ran = proc.run(["sinfo", "--noheader", "--partition", part, "--format=%P %a %D %l"])
    text = ran.output
    if not ran.ok or not text:
        all_parts = proc.run(["sinfo", "--noheader", "--format=%P"]).output
        return Finding(ERROR, "partition", f"partition {part!r} is not known to sinfo",
                       f"use one of: {' '.join(all_parts.split())} (in {profile.source})")
    name, avail, nodes, limit = text.split()[:4]
    if avail != "up":
        return Finding(WARNING, "partition", f"{name} is {avail}", "jobs will pend until the partition is up")
    return Finding(OK, "partition", f"{name}: {nodes} nodes, time limit {limit}")


def check_modules(profile: ClusterProfile | None) -> list[Finding]:
    ran = _login_shell("module --version 2>&1")
    text = ran.output
    m = re.search(r"Modules based on Lua: Version (\S+)", text) or re.search(r"VERSION=(\S+)", text)
    wanted = tuple(profile.get("modules", ())) if profile else ()
    if not ran.ok:
        return [Finding(ERROR if wanted else WARNING, "modules", "no module command in a login shell",
                        "install Lmod (Debian: apt-get install lmod) or load the site's profile")]
    kind = f"Lmod {m.group(1)}" if m and "Lua" in text else text.splitlines()[0] if text else "module"
    out = [Finding(OK, "modules", f"{kind} (module command in login shells)")]
    if profile and wanted:
        uses = " && ".join(f"module use {shlex.quote(d)}" for d in profile.get("module_use", ()))
        loads = " && ".join(f"module load {shlex.quote(x)}" for x in wanted)
        loaded = _login_shell(" && ".join(x for x in (uses, loads) if x) + " 2>&1")
        if loaded.ok:
            out.append(Finding(OK, "profile modules", f"loaded: {', '.join(wanted)}"))
        else:
            said = " ".join((loaded.output or loaded.why()).split())
            said = said.split("While processing")[0].strip()
            out.append(Finding(ERROR, "profile modules", f"module load failed: {said}",
                               f"fix the module names in {profile.source} (module avail), or set the variable "
                               "the error names"))
    return out


# What a login node needs when hpcbench's metadata cannot be read (run from a checkout that was never installed).
CORE = ("jinja2", "tabulate", "pandas", "matplotlib", "submitit")


def check_python() -> list[Finding]:
    """hpcbench's core packages (setup.cfg's install_requires, as installed) importable here, and the C scanner."""
    from hpcbench import __version__
    from hpcbench.errors import requirements

    need = [n for n, extra in requirements() if extra is None] or list(CORE)
    lost = [n for n in need if importlib.util.find_spec(n) is None]
    spec = importlib.util.find_spec("hpcbench")
    where = Path(spec.origin or "" if spec else "").parent
    out = [Finding(ERROR if lost else OK, "python",
                   f"{sys.executable} (Python {sys.version.split()[0]}); hpcbench {__version__} from {where}"
                   + (f"; cannot import {', '.join(lost)}" if lost else f"; core packages: {', '.join(need)}"),
                   f"{sys.executable} -m pip install {' '.join(lost)} (hpcbench's core install has them)"
                   if lost else None)]
    out.append(check_scanner())
    return out


def check_scanner() -> Finding:
    """The parser's C scanner: without it `hpcbench parse` reads big NCCL logs about 3x slower (benchmarks/parse_speed.py)."""
    from hpcbench.parse import fastpath

    if fastpath._scan is not None:
        return Finding(OK, "log scanner", f"C scanner built ({Path(fastpath._scan.__file__).name})")
    off = os.environ.get(fastpath.C_ENV) == "0"
    why = ("switched off by HPCBENCH_PARSE_C=0" if off
           else "not built: no C compiler or Python headers where hpcbench was installed, or an older build")
    return Finding(WARNING, "log scanner", f"{why}; the pure-Python engine reads the logs (the same facts; big logs "
                   "about 3x slower)", "unset HPCBENCH_PARSE_C" if off else
                   f"install gcc and the Python headers (Debian: python3-dev), then install hpcbench again: "
                   f"{sys.executable} -m pip install --force-reinstall --no-deps hpcbench (or -e CHECKOUT); "
                   "the facts are the same either way")


def check_frameworks(profile: ClusterProfile | None = None) -> list[Finding]:
    """torch and Horovod in the interpreter the ranks run: the profile's python, else this one. A login node's
    core install has neither, and needs neither unless the ranks run it."""
    from hpcbench.errors import MissingExtra
    from hpcbench.plan.limits import probe
    from hpcbench.workloads.capabilities import detect

    python = (profile.get("python") if profile else None) or sys.executable
    theirs = python != sys.executable
    caps = probe(python, dict(os.environ)) if theirs else detect()
    if caps is None:
        return [Finding(WARNING, "torch", f"the ranks run {python} (the profile's python), which does not answer here",
                        "check it on a compute node: srun " + python + " -m hpcbench env")]
    if caps.torch is None:
        who = f"the ranks run {python} (the profile's python)" if theirs else \
            "the ranks run this interpreter (no python in the cluster profile)"
        hint = MissingExtra("torch", "doctor", python).hint or ""
        return [Finding(ERROR, "torch", f"torch is not importable: {caps.reasons.get('torch')}; {who}",
                        f"{hint.removeprefix('install it: ')}; or, where the login node only plans and "
                        "summarizes, set python in the cluster profile to an interpreter of the compute nodes that has "
                        "it (docs/install.md)")]
    have = [n for n, ok in caps.dist_backends.items() if ok]
    lack = [n for n, ok in caps.dist_backends.items() if not ok]
    out = [Finding(OK, "torch", f"torch {caps.torch} (CUDA {caps.cuda_version or 'none'}, "
                   f"{caps.cuda_devices} GPUs visible here); torch.distributed backends: {', '.join(have) or 'none'}"
                   + (f"; not built: {', '.join(lack)}" if lack else ""))]
    if caps.horovod is None:
        out.append(Finding(WARNING, "horovod", f"horovod is not importable: {caps.reasons.get('horovod')}",
                           f"{HOROVOD_BUILD}; needed for framework = \"horovod\""))
    else:
        flags = ", ".join(f"{k}={v}" for k, v in caps.horovod_build.items() if v is not None)
        out.append(Finding(OK, "horovod", f"horovod {caps.horovod}: controllers "
                           f"{', '.join(caps.horovod_controllers) or 'none'}; tensor ops "
                           f"{', '.join(caps.horovod_tensor_ops) or 'none'} ({flags})"))
    return out


def fs_type(path: Path) -> str:
    ran = proc.run(["findmnt", "--noheadings", "--output", "FSTYPE", "--target", str(path)])
    if ran.ok and ran.output:
        return ran.output.split()[0]
    ran = proc.run(["stat", "--file-system", "--format=%T", str(path)])
    return ran.output if ran.ok else "unknown"


def check_run_dir(runs_root: Path, profile: ClusterProfile | None, job: bool, timeout_s: float,
                  echo: Callable[[str], None] | None = None) -> Finding:
    runs_root = runs_root.resolve()
    try:
        runs_root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return Finding(ERROR, "run directory", f"cannot create {runs_root}: {e}",
                       "give --runs-root a writable folder on a shared filesystem")
    fs = fs_type(runs_root)
    guess = "a network filesystem" if fs in SHARED_FS else "a local filesystem"
    if not job or shutil.which("sbatch") is None:
        shared = fs in SHARED_FS
        return Finding(OK if shared else WARNING, "run directory",
                       f"{runs_root} is on {fs} ({guess}; heuristic, no job submitted)", None if shared else "put runs on the shared filesystem (e.g. $SCRATCH), or run "
                       "doctor without --no-job to test it with a real job")
    return _probe_job(runs_root, fs, guess, profile, timeout_s, echo)


def _probe_job(runs_root: Path, fs: str, guess: str, profile: ClusterProfile | None, timeout_s: float,
               echo: Callable[[str], None] | None) -> Finding:
    from hpcbench.errors import SchedulerError
    from hpcbench.submit import slurm

    probe = runs_root / f".hpcbench-doctor-{uuid.uuid4().hex[:12]}"
    probe.mkdir()
    token = uuid.uuid4().hex
    (probe / "token").write_text(token)
    nodes = min(2, (profile.max_nodes if profile and profile.max_nodes else 2))
    # Each node writes back what it read: a node that cannot see the folder leaves no file behind.
    step = f'cat {shlex.quote(str(probe / "token"))} > {shlex.quote(str(probe))}/seen-"$SLURMD_NODENAME"'
    script = probe / "probe.sh"
    args = [f"--nodes={nodes}", "--ntasks-per-node=1", "--time=2", "--job-name=hpcbench-doctor",
            "--output=/dev/null", "--error=/dev/null"]
    for key in ("partition", "account", "qos"):
        if profile and profile.get(key):
            args.append(f"--{key}={profile.get(key)}")
    script.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {a}\n" for a in args)
                      + f"srun --ntasks={nodes} --ntasks-per-node=1 bash -c {shlex.quote(step)}\n")
    try:
        try:
            job = slurm.sbatch(script)
        except SchedulerError as e:
            return Finding(WARNING, "run directory", f"{runs_root} is on {fs}; the probe job was refused: {e}",
                           "check partition/account, or run doctor --no-job for the heuristic only")
        if echo:
            echo(f"  (probe job {job} on {nodes} node(s): do they see {runs_root}?)")
        deadline = time.monotonic() + timeout_s
        while slurm.queue_states([job]):
            if time.monotonic() > deadline:
                slurm.cancel([job])
                return Finding(WARNING, "run directory", f"{runs_root} is on {fs} ({guess}); probe job {job} "
                               f"did not finish in {timeout_s:.0f}s and was cancelled",
                               "try again when the queue is shorter, or raise --timeout")
            time.sleep(1)
        seen = sorted(p.name[len("seen-"):] for p in probe.glob("seen-*") if p.read_text() == token)
        if len(seen) >= nodes:
            return Finding(OK, "run directory", f"{runs_root} ({fs}) is visible from compute nodes "
                           f"{', '.join(seen)} (probe job {job})")
        return Finding(ERROR, "run directory", f"{runs_root} ({fs}) was seen by {len(seen)} of {nodes} "
                       f"compute nodes of probe job {job} ({', '.join(seen) or 'none'})",
                       "use --runs-root on a filesystem every compute node mounts (e.g. $SCRATCH or $HOME)")
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def run(profile: ClusterProfile | None, runs_root: Path, job: bool = True, timeout_s: float = 120,
        echo: Callable[[str], None] | None = None) -> list[Finding]:
    findings = check_slurm()
    slurm_ok = not any(f.fails for f in findings)
    if slurm_ok:
        findings.append(check_mpi(profile))
        part = check_partition(profile)
        if part:
            findings.append(part)
    findings += check_modules(profile)
    findings += check_python()
    findings += check_frameworks(profile)
    findings.append(check_run_dir(runs_root, profile, job and slurm_ok, timeout_s, echo))
    if shutil.which("mpirun") is None:
        findings.append(Finding(WARNING, "mpirun", "mpirun not on PATH", "load an MPI module (launcher = \"mpirun\" "
                                "and Horovod over MPI need it)"))
    return findings


def format_findings(findings: list[Finding]) -> str:
    lines = []
    for f in findings:
        lines.append(f"{f.severity:8} {f.rule}: {f.claim}")
        if f.fix and f.severity != OK:
            lines.append(f"{'':8}   fix: {f.fix}")
    bad = [f for f in findings if f.fails]
    lines.append(f"{len(bad)} required item(s) missing" if bad else "ready: nothing required is missing")
    return "\n".join(lines) + "\n"


def to_json(findings: list[Finding]) -> list[dict[str, Any]]:
    return [f.to_dict() for f in findings]
