"""Does explain name the cause that was made? A diagnosis benchmark on real runs. Prints figures; not a test.

    PYTHONPATH=. .venv/bin/python benchmarks/explain_accuracy.py            # every scenario x 3 repeats
    PYTHONPATH=. .venv/bin/python benchmarks/explain_accuracy.py --quick    # every scenario once
    ... --scenarios straggler,slow-link-2x1 --repeats 5 --keep runs/accuracy
    ... --rescore runs/accuracy     # explain the runs kept there again (after a change to explain), run nothing

Each scenario is a one-point sweep made for a known cause (or none), run for real: on the local 2-node Slurm
(`hpcbench minicluster up`, `cluster = "minicluster"`: each node a network namespace with one CPU of its own),
its 1-node points on a 1-node minicluster that has both CPUs (WIDE, so that a node has cores to share or to
spare), or, where Slurm cannot make the cause, the local backend.
Causes, alone and in pairs: oversubscribed cores, a binding mismatch (a wrapper that moves a rank off the
CPUs srun bound it to), shared cores (unbound ranks), a straggler rank (slow_rank / slow_ms), slow input (MNIST
decoded from its IDX files), a slow link and a slow node (`hpcbench minicluster degrade node2 --link 20mbit` / `--cpu 0.3` around the run;
the minicluster's nodes are network namespaces with a CPU each, so the link is real and the quota is node2's).

Scores, over every scenario x repeat:
- top-1: the point's first cause (the first one `hpcbench explain` prints for it) is a cause that was made;
- top-3: every cause made is among its first three causes;
- false alarms: a healthy control whose causes include one of the benchmark's causes, or a symptom of one
  (compute-growth, comm-share, straggler), where nothing was made.

What counts as healthy: a point with cores to spare or each rank on its own core, nothing injected (a 2-node
point of the minicluster is one host, but each node has a CPU of its own: explain says so as a caveat). A busy host
is not made by the benchmark but by whatever else runs on the machine: a 'load' finding is true when it
appears, so it is counted apart (the 'load' column) and is not a false alarm; caveats about the figures
(few-repeats, noisy-steps, within-noise) are never causes. Scenarios run one after another, repeats
interleaved (round r runs every scenario once), each job alone in the queue of this benchmark
(max_jobs_in_queue = 1), so that one scenario does not load another's host.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The benchmark's causes, by the rule that names each; healthy controls must show none of these, nor their symptoms.
CAUSES = ("oversubscribed", "binding", "shared-cores", "straggler", "input", "one-host", "slowest-link", "link-bound")
SYMPTOMS = ("compute-growth", "comm-share")
ENVIRONMENT = ("load",)  # true where it appears: what else ran on the machine, not made here


@dataclass(frozen=True)
class Scenario:
    name: str
    causes: tuple[str, ...]  # the rules that must name what was made; () for a healthy control
    nodes: int = 1
    rpn: int = 1
    backend: str = "sbatch"  # or "local": the cause cannot be asked of Slurm (more ranks than a node's CPUs)
    framework: str = "ddp"
    comm: str = "gloo"
    cpu_bind: str = "cores"
    cpus_per_task: int = 1
    slow_ms: int = 0  # > 0: rank 1 sleeps this long in every step
    mnist: bool = False  # read MNIST from its IDX files instead of synthetic data
    taskset: bool = False  # the ranks' interpreter is a wrapper that moves it off the CPUs it was bound to
    batch_size: int = 32
    degrade: tuple[str, ...] = ()  # `hpcbench minicluster degrade` arguments, restored after the run
    steps: int = 8


SCENARIOS = (
    Scenario("healthy-ddp-1x1", ()),
    Scenario("healthy-hvd-mpi-1x1", (), framework="horovod", comm="mpi"),
    # healthy controls do enough work per step that the exchange is a small part of it: an MLP at batch 32 spends
    # 80% of its step communicating (33% at 1024), which comm-share rightly says
    Scenario("healthy-ddp-1x2-cores", (), rpn=2, batch_size=4096),
    Scenario("oversubscribed", ("oversubscribed",), rpn=4, backend="local"),
    Scenario("binding", ("binding",), cpus_per_task=2, taskset=True),
    Scenario("shared-cores", ("shared-cores",), rpn=2, cpu_bind="none"),
    Scenario("straggler", ("straggler",), rpn=2, slow_ms=150),
    Scenario("input", ("input",), mnist=True, batch_size=128),
    # the minicluster's nodes are one host with a CPU each: one-host is a caveat there (explain says so), not a cause
    Scenario("healthy-ddp-2x1", (), nodes=2, batch_size=4096),
    Scenario("straggler+shared-cores", ("straggler", "shared-cores"), rpn=2, cpu_bind="none", slow_ms=150),
    Scenario("straggler-2x1", ("straggler",), nodes=2, slow_ms=150),
    Scenario("oversubscribed-2x2", ("oversubscribed",), nodes=2, rpn=2),  # 2 ranks on each node's one CPU
    Scenario("input+straggler", ("input", "straggler"), rpn=2, mnist=True, batch_size=128, slow_ms=80),
    Scenario("binding+input", ("binding", "input"), cpus_per_task=2, taskset=True, mnist=True, batch_size=128),
    Scenario("oversubscribed+straggler", ("oversubscribed", "straggler"), rpn=4, backend="local", slow_ms=150),
    # both nodes' bytes cross node2's link: 'link-bound' (slowest-link needs another link's peak to compare)
    Scenario("slow-link-2x1", ("link-bound",), nodes=2, degrade=("node2", "--link", "20mbit")),
    # at batch 32 the step (9 ms) fits in node2's 30 ms of CPU per 100 ms period: the quota stalls one step in
    # ten (noisy-steps) and no rank is slower on average; at 2048 every step needs more than the quota gives, over
    # enough steps (8 steps, 0.13 s, were one or two CFS periods: throttled or not by luck)
    Scenario("slow-node-2x1", ("straggler",), nodes=2, degrade=("node2", "--cpu", "0.3"), batch_size=2048,
             steps=40),
)
BY_NAME = {s.name: s for s in SCENARIOS}
WIDE = Path("/var/tmp/hpcbench-accuracy-wide")  # `minicluster up --nodes 1 --dir WIDE`: one node, every CPU


def write_mnist(root: Path, n: int = 512) -> Path:
    """MNIST's IDX files (yann.lecun.com's format, uncompressed) in torchvision's MNIST/raw layout."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for prefix, count in (("train", n), ("t10k", 16)):
        pixels = bytes((i * 7 + j) % 256 for i in range(count) for j in range(28 * 28))
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 0x803, count, 28, 28) + pixels)
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, count)
                                                          + bytes(i % 10 for i in range(count)))
    return root


def wrapper(root: Path) -> Path:
    """An interpreter that moves itself off the CPUs its launcher bound it to (onto one it was not given, where the
    job's cpuset allows it, else onto the first of its own), as a site's wrapper calling taskset would, then runs
    Python."""
    path = root / "python-taskset"
    path.write_text(f"#!{sys.executable}\n"
                    "import os, sys\n"
                    "mine = sorted(os.sched_getaffinity(0))\n"
                    "for cpu in [c for c in range(os.cpu_count() or 1) if c not in mine] + mine[:len(mine) > 1]:\n"
                    "    try:\n"
                    "        os.sched_setaffinity(0, {cpu})\n"
                    "        break\n"
                    "    except OSError:  # outside the job's cgroup cpuset\n"
                    "        continue\n"
                    f"os.execv({sys.executable!r}, [{sys.executable!r}, *sys.argv[1:]])\n")
    path.chmod(0o755)
    return path


def sweep_text(s: Scenario, name: str, work: Path) -> str:
    slurm = ['time = "00:05:00"', f"cpus_per_task = {s.cpus_per_task}", f'cpu_bind = "{s.cpu_bind}"',
             "max_jobs_in_queue = 1"]
    if s.taskset:
        slurm.append(f'python = "{wrapper(work)}"')
    data = ['data = "mnist"', f'data_dir = "{work / "mnist"}"'] if s.mnist else []
    slow = ["slow_rank = 1", f"slow_ms = {s.slow_ms}"] if s.slow_ms else []
    return "\n".join([
        *(['cluster = "minicluster"'] if s.backend == "sbatch" else []),
        "[sweep]", f'name = "{name}"',
        "[slurm]", *slurm,
        "[workload]", f'framework = "{s.framework}"', f'backend = "{s.comm}"', 'device = "cpu"', 'model = "mlp"',
        f"batch_size = {s.batch_size}", f"steps = {s.steps}", "warmup_steps = 2", *data, *slow,
        "[matrix]", f"nodes = [{s.nodes}]", f"ranks_per_node = [{s.rpn}]", ""])


@dataclass
class Outcome:
    scenario: Scenario
    repeat: int
    causes: list[str]  # the point's causes as explain ranks them (caveats left out)
    state: str
    seconds: float
    error: str = ""

    @property
    def top1(self) -> bool:
        return bool(self.scenario.causes) and bool(self.causes) and self.causes[0] in self.scenario.causes

    @property
    def top3(self) -> bool:
        return bool(self.scenario.causes) and set(self.scenario.causes) <= set(self.causes[:3])

    @property
    def false_alarm(self) -> bool:
        return not self.scenario.causes and any(c in CAUSES + SYMPTOMS for c in self.causes)

    @property
    def loaded(self) -> bool:
        return any(c in ENVIRONMENT for c in self.causes)


def _run_name(s: Scenario, repeat: int) -> str:
    return f"acc-{s.name.replace('+', '-')}-{repeat}"


def score(s: Scenario, repeat: int, run: Path, took: float) -> Outcome:
    """What explain says of the run's one point: its causes, in order."""
    from hpcbench.explain import explain_paths
    from hpcbench.explain.summary import summarize

    [w] = explain_paths([run])
    leads = [f.rule for f, _ in summarize([w]).leads(w)]
    return Outcome(s, repeat, leads, w.point.state, took, "" if w.point.ok else (w.point.reason or "")[:200])


def run_one(s: Scenario, repeat: int, work: Path) -> Outcome:
    name = _run_name(s, repeat)
    sweep = work / f"{name}.toml"
    sweep.write_text(sweep_text(s, name, work))
    run = work / "runs" / name
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep),
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    if s.nodes == 1 and s.backend == "sbatch":  # the 1-node cluster with both CPUs, and its profile
        env.update(HPCBENCH_CLUSTER_PATH=str(WIDE), SLURM_CONF=str(WIDE / "slurm.conf"))
    start = time.monotonic()
    if s.degrade:
        _minicluster("degrade", *s.degrade)
    try:
        proc = subprocess.run([sys.executable, "-m", "hpcbench", "sweep", str(sweep), "--backend", s.backend,
                               "--wait", "--poll", "1", "--run-dir", str(run)], env=env, capture_output=True,
                              text=True, timeout=600, check=False)
    finally:
        if s.degrade:
            _minicluster("restore", s.degrade[0])
    took = time.monotonic() - start
    if not run.is_dir():
        return Outcome(s, repeat, [], "NOT RUN", took, (proc.stderr or proc.stdout).strip()[-200:])
    return score(s, repeat, run, took)


def _minicluster(*argv: str) -> None:
    subprocess.run([sys.executable, "-m", "hpcbench", "minicluster", *argv], check=True, capture_output=True,
                   timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


def confusion(outcomes: list[Outcome]) -> str:
    """Rows: the cause made (a pair is one row); columns: the first cause explain named."""
    named = sorted({o.causes[0] if o.causes else "(none)" for o in outcomes})
    rows: dict[str, Counter[str]] = {}
    for o in outcomes:
        made = "+".join(o.scenario.causes) or "(healthy)"
        rows.setdefault(made, Counter())[o.causes[0] if o.causes else "(none)"] += 1
    head = "made \\ named first"
    width = max(len(head), *(len(r) for r in rows)) + 2
    cols = [max(len(c), 3) for c in named]
    out = [head.ljust(width) + "  ".join(c.rjust(w) for c, w in zip(named, cols, strict=True))]
    for made, counts in rows.items():
        out.append(made.ljust(width) + "  ".join(str(counts.get(c, "")).rjust(w) for c, w in zip(named, cols,
                                                                                                 strict=True)))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs of each scenario (default 3)")
    ap.add_argument("--scenarios", help=f"comma-separated names (default all): {', '.join(BY_NAME)}")
    ap.add_argument("--quick", action="store_true", help="each scenario once (--repeats 1)")
    ap.add_argument("--keep", metavar="DIR", help="keep the sweeps and runs in DIR (default: a temporary folder)")
    ap.add_argument("--rescore", metavar="DIR", help="run nothing: explain again the runs a --keep DIR holds")
    args = ap.parse_args(argv)
    chosen = list(SCENARIOS)
    if args.scenarios:
        unknown = [n for n in args.scenarios.split(",") if n not in BY_NAME]
        if unknown:
            print(f"error: unknown scenario(s) {', '.join(unknown)} (choose from: {', '.join(BY_NAME)})",
                  file=sys.stderr)
            return 2
        chosen = [BY_NAME[n] for n in args.scenarios.split(",")]
    repeats = 1 if args.quick else args.repeats
    import hpcbench.explain.summary  # noqa: F401  loaded now: the runs take minutes, and the code may change meanwhile
    if repeats < 1:
        print("error: --repeats must be 1 or more", file=sys.stderr)
        return 2
    if args.rescore:
        return report(rescore(Path(args.rescore), chosen, repeats), chosen, repeats, 0.0)
    for extra in ([], ["--nodes", "1", "--dir", str(WIDE)]):
        up = subprocess.run([sys.executable, "-m", "hpcbench", "minicluster", "up", *extra], capture_output=True,
                            text=True, timeout=300, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
        if up.returncode != 0:
            print(f"error: hpcbench minicluster up {' '.join(extra)} failed: {up.stderr.strip()[-300:]}",
                  file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="explain-accuracy-") as tmp:
        work = Path(args.keep).resolve() if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        write_mnist(work / "mnist")
        outcomes: list[Outcome] = []
        began = time.monotonic()
        for r in range(repeats):  # repeats interleaved: drift in the machine touches every scenario alike
            for s in chosen:
                outcomes.append(run_one(s, r, work))
                print(_line(outcomes[-1]), flush=True)
        total = time.monotonic() - began
    return report(outcomes, chosen, repeats, total)


def _line(o: Outcome) -> str:
    s = o.scenario
    mark = ("ok  " if o.top1 else "MISS") if s.causes else ("FALSE" if o.false_alarm else "ok  ")
    return (f"{mark} {s.name:<26} r{o.repeat}  {o.state:<10} {o.seconds:5.1f}s  causes: {', '.join(o.causes) or '-'}"
            f"{'  ' + o.error if o.error else ''}")


def rescore(work: Path, chosen: list[Scenario], repeats: int) -> list[Outcome]:
    out = []
    for r in range(repeats):
        for s in chosen:
            run = work / "runs" / _run_name(s, r)
            if run.is_dir():
                out.append(score(s, r, run, 0.0))
                print(_line(out[-1]), flush=True)
    return out


def report(outcomes: list[Outcome], chosen: list[Scenario], repeats: int, total: float) -> int:
    made = [o for o in outcomes if o.scenario.causes]
    healthy = [o for o in outcomes if not o.scenario.causes]
    print()
    print(confusion(outcomes))
    print()
    lost = [o for o in outcomes if o.state != "COMPLETED"]
    if made:  # a run the cluster lost counts as a miss here, and is said below
        print(f"top-1: {sum(o.top1 for o in made)}/{len(made)} = {sum(o.top1 for o in made) / len(made):.0%}"
              "  (goal >= 90%)")
        print(f"top-3: {sum(o.top3 for o in made)}/{len(made)} = {sum(o.top3 for o in made) / len(made):.0%}")
        measured = [o for o in made if o.state == "COMPLETED"]
        if lost and measured:
            print(f"  of the measured runs only: top-1 {sum(o.top1 for o in measured)}/{len(measured)}, "
                  f"top-3 {sum(o.top3 for o in measured)}/{len(measured)}")
    if healthy:
        fa = sum(o.false_alarm for o in healthy)
        print(f"false alarms on healthy controls: {fa}/{len(healthy)} = {fa / len(healthy):.0%}  (goal <= 5%)")
    for o in lost:
        print(f"no measurement: {o.scenario.name} r{o.repeat}: {o.state}: {o.error}")
    print(f"busy host ('load', true where it appears, not a false alarm): {sum(o.loaded for o in outcomes)}"
          f"/{len(outcomes)} runs")
    took = f" in {total / 60:.1f} min" if total else ""
    print(f"{len(outcomes)} runs ({len(chosen)} scenarios x {repeats}){took}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
