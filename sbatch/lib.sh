# shellcheck shell=bash
# Shared by the ready scripts in sbatch/: run folder and log, modules, device, launcher options.
# Sourced, never run. Every setting is an environment variable with a default, so a script can be
# used as it is (`sbatch sbatch/X.sh`) or steered from the command line
# (`MODULES="cuda/12.4 nccl/2.21" sbatch sbatch/X.sh`); sbatch passes the environment on.

# Where run folders go. summarize reads them: hpcbench summarize "$RUNS_ROOT"/<script>-<jobid>
RUNS_ROOT=${RUNS_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}/runs}
MODULE_USE=${MODULE_USE:-}          # folders for `module use`, space separated
MODULES=${MODULES:-}                # modules to load, space separated, in order
SRUN_MPI=${SRUN_MPI:-}              # srun --mpi plugin (srun --mpi=list); empty: the site's MpiDefault
CPU_BIND=${CPU_BIND:-sockets}       # srun --cpu-bind: sockets | cores | none
HPCBENCH_DEVICE=${HPCBENCH_DEVICE:-auto}   # auto | cuda | cpu (cpu: Gloo on the CPU, no GPU needed)
PYTHON=${PYTHON:-python3}           # the ranks' interpreter (module load hpcbench puts its venv first)
export NCCL_DEBUG=${NCCL_DEBUG:-INFO}   # the transport lines are the evidence; keep them

# hpcb_start NAME: make RUN_DIR, send everything after this into RUN_DIR/NAME.log, print the header.
hpcb_start() {
    local name=$1
    RUN_DIR="$RUNS_ROOT/$name-${SLURM_JOB_ID:-$$}"
    mkdir -p "$RUN_DIR"
    LOG="$RUN_DIR/$name.log"
    echo "hpcbench $name: log in $LOG"
    exec >>"$LOG" 2>&1
    echo "# hpcbench sbatch/$name.sh job ${SLURM_JOB_ID:-none} on ${SLURM_JOB_NODELIST:-$(hostname)}" \
        "(${SLURM_JOB_NUM_NODES:-1} nodes) at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
}

# hpcb_modules: `module use` + `module load` from MODULE_USE / MODULES; stops the job if one fails.
hpcb_modules() {
    [ -n "$MODULES$MODULE_USE" ] || return 0
    if ! type module >/dev/null 2>&1; then
        local f
        for f in /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash /etc/profile.d/modules.sh; do
            # shellcheck source=/dev/null  # the site's init file, not ours to lint
            if [ -r "$f" ]; then set +u; . "$f"; set -u; break; fi
        done
    fi
    local d m
    for d in $MODULE_USE; do module use "$d" || hpcb_die "module use $d failed"; done
    for m in $MODULES; do module load "$m" || hpcb_die "module load $m failed"; done
    echo "# modules: ${LOADEDMODULES:-none}"
}

# hpcb_device: resolve HPCBENCH_DEVICE=auto to cuda when this node has a GPU, else cpu.
hpcb_device() {
    if [ "$HPCBENCH_DEVICE" = auto ]; then
        if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
            HPCBENCH_DEVICE=cuda
        else
            HPCBENCH_DEVICE=cpu
        fi
    fi
    echo "# device: $HPCBENCH_DEVICE"
}

# hpcb_srun_opts: the srun options every script uses (MPI plugin, binding), one per line.
hpcb_srun_opts() {
    if [ -n "$SRUN_MPI" ]; then echo "--mpi=$SRUN_MPI"; fi
    echo "--cpu-bind=$CPU_BIND"
}

# hpcb_bytes 1G: nccl-tests' size notation (K, M, G suffixes, powers of 1024) in bytes.
hpcb_bytes() {
    local n=${1%[KkMmGg]}
    case $1 in
        *[Kk]) echo $((n * 1024)) ;;
        *[Mm]) echo $((n * 1024 * 1024)) ;;
        *[Gg]) echo $((n * 1024 * 1024 * 1024)) ;;
        *) echo "$n" ;;
    esac
}

hpcb_die() {
    echo "hpcbench: $*" >&2
    exit 1
}

# hpcb_run CMD...: print the command, run it, keep its exit status in RUN_DIR/exitcode.
hpcb_run() {
    echo "# running: $*"
    "$@"
    local rc=$?
    echo "$rc" >"$RUN_DIR/exitcode"
    echo "# exit code: $rc"
    return "$rc"
}
