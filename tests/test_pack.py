"""pack = true: points as srun steps of one allocation, each keeping its own folder, records and state."""
from __future__ import annotations

import json
import subprocess
from dataclasses import replace

import pytest
from conftest import write

from hpcbench.errors import ConfigError
from hpcbench.plan.expand import expand
from hpcbench.plan.spec import parse
from hpcbench.rundir import RunDir
from hpcbench.submit.pack import render_pack

PACKED = """
[slurm]
pack = true
time = "3"
[workload]
steps = 3
warmup_steps = 1
[matrix]
nodes = [1, 2]
ranks_per_node = [1, 2]
"""


def test_pack_script_sizes_the_allocation_for_its_largest_point(tmp_path):
    spec = parse(PACKED, "p.toml")
    points = expand(spec)
    rd = RunDir.create(tmp_path / "run", spec.text, "p", points)
    text = render_pack(spec, rd, 1, points, "/usr/bin/python3")
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n" in text
    assert "#SBATCH --time=0-00:12:00" in text  # four steps of 3 minutes, one after another
    assert f"#SBATCH --comment=hpcbench:{rd.run_id()}:pack-1" in text
    for p in points:
        paths = rd.point(p)
        assert f"srun --nodes={p.nodes} --output={paths.stdout()} --error={paths.stderr()} " \
               f"--ntasks={p.world_size} --ntasks-per-node={p.ranks_per_node}" in text
        assert f"echo \"$?\" > {paths.exitcode}" in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    mpirun = replace(spec, slurm=replace(spec.slurm, launcher="mpirun"))
    with pytest.raises(ConfigError, match="slurm.launcher: 'mpirun' cannot be used with slurm.pack = true"):
        render_pack(mpirun, rd, 2, points, "/usr/bin/python3")


@pytest.mark.slurm
def test_packed_points_run_in_one_allocation_with_their_own_records(cli, tmp_path, slurm_cluster):
    sweep = write(tmp_path / "pack.toml", PACKED.replace("ranks_per_node = [1, 2]", "ranks_per_node = [1]"))
    run = tmp_path / "run"
    proc = cli("sweep", str(sweep), "--backend", "sbatch", "--wait", "--poll", "1", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "packed 2 points into 1 allocation(s): 1 allocation(s) saved" in proc.stdout
    rd = RunDir.open(run)
    subs = rd.submissions()
    [job] = {s["job_id"] for s in subs.values()}
    assert {s["pack"] for s in subs.values()} == {"pack-1"}
    for p in rd.points():
        paths = rd.point(p)
        rec = json.loads(paths.result.read_text())
        assert rec["job_id"] == job and len({r["slurm_node"] for r in rec["ranks"]}) == p.nodes
        # The step's output went to the point's own folder, named by the shared job id.
        assert paths.stdout(job).exists()
        # --wait returned only once each step had written its exit status, not just its record.
        assert paths.exitcode.read_text().strip() == "0"
    assert proc.stdout.count("COMPLETED") >= 2
