"""The words hpcbench uses, each list said once: frameworks, backends, workload kinds, devices,
launchers, data sets, models, point states, Slurm's job states and finding severities.

Plain data only: planning on a login node imports this and nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcbench.collectives import TABLE

FRAMEWORKS = ("ddp", "horovod", "none")
BACKENDS = ("gloo", "mpi", "nccl", "oneccl")
KINDS = ("train", "collective")
# A kind's first name: point ids hash it, so that a renamed kind keeps every id it had; a sweep, plan.json or
# record that still says it reads as the kind's name today.
FIRST_NAMES = {"collective": "allreduce"}
RENAMED = {old: new for new, old in FIRST_NAMES.items()}
DEVICES = ("cpu", "cuda")
LAUNCHERS = ("srun", "mpirun", "horovodrun", "torchrun")
CPU_BINDS = ("sockets", "cores", "none")
# What speedup is measured against (figures/baseline.py; summarize and explain --baseline).
BASELINES = ("auto", "per-backend", "single-gpu", "single-node", "no-framework")
# The order a sweep's points are submitted in (plan/expand.run_order): shuffled by a seed, or as declared.
ORDERS = ("shuffled", "declared")
# How a GPU point puts each rank on the socket of its GPU: Slurm's block distribution (mpirun: ranks numbered
# in blocks per socket), Slurm's own GPU binding (srun only), or neither.
GPU_BINDS = ("block", "closest", "none")
DATA = ("synthetic", "mnist", "cifar10")
SCALING = ("weak", "strong")
DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64")
# nccl-tests' collectives, by the names of its binaries (all_gather_perf, ...): what kind = "collective" measures
COLLECTIVES = tuple(TABLE)
NO_FRAMEWORK = "none"  # one process, no communication library: the ideal baseline
# Exported in a job whose point varies environment variables ([matrix.env]): their names, so that the ranks
# record the values they saw.
ENV_AXES_VAR = "HPCBENCH_ENV_AXES"

# Sweep backend -> the torch.distributed backend name, and -> Horovod's (controller, CPU tensor operations).
TORCH_BACKEND = {"gloo": "gloo", "nccl": "nccl", "mpi": "mpi", "oneccl": "ccl", "ucc": "ucc"}
HOROVOD_OPS = {"mpi": "mpi", "gloo": "gloo", "nccl": "nccl", "oneccl": "ccl"}
HOROVOD_MAP = {"mpi": ("mpi", "mpi"), "gloo": ("gloo", "gloo"), "nccl": ("mpi", "mpi"), "oneccl": ("mpi", "ccl")}


@dataclass(frozen=True)
class ModelInfo:
    name: str
    input_shape: tuple[int, ...]  # one sample, channels first
    num_classes: int  # for a language model: the vocabulary, predicted at every position
    description: str
    params: int  # trainable parameters: the gradient a data-parallel step reduces (tests check against torch)
    tokens: bool = False  # input is token ids of shape input_shape (sequence length), not floats


LSTM_VOCAB = 10000  # the Penn Treebank vocabulary size of the classic word-level LM
LSTM_SEQ_LEN = 35

MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo("mlp", (1, 28, 28), 10, "two-layer perceptron on 28x28 inputs; tiny, for smoke tests", 101_770),
        ModelInfo("mnist_cnn", (1, 28, 28), 10, "the CNN of Horovod's pytorch_mnist example", 21_840),
        ModelInfo("resnet18", (3, 224, 224), 1000, "torchvision ResNet-18, ImageNet shape", 11_689_512),
        ModelInfo("resnet50", (3, 224, 224), 1000, "torchvision ResNet-50, ImageNet shape", 25_557_032),
        ModelInfo("resnet101", (3, 224, 224), 1000, "torchvision ResNet-101, ImageNet shape", 44_549_160),
        ModelInfo("cifar_resnet18", (3, 32, 32), 10, "ResNet-18 for CIFAR-10: 3x3 stem, no max-pool", 11_173_962),
        ModelInfo("lstm_lm", (LSTM_SEQ_LEN,), LSTM_VOCAB, "LSTM language model: embedding, 2-layer LSTM, "
                  "linear over the vocabulary; few FLOPs per parameter, so communication weighs more than in CNNs",
                  4_653_200, tokens=True),
    )
}

# One sample of each real data set, as the models above take it.
DATASET_SHAPES: dict[str, tuple[int, ...]] = {"mnist": (1, 28, 28), "cifar10": (3, 32, 32)}

# --- the networks NCCL uses, as hpcbench.parse names them (a plugin keeps its own name), and IB link layers ---
NET_IB, NET_ROCE, NET_SOCKET = "IB", "RoCE", "Socket"
LINK_LAYERS = (NET_IB, NET_ROCE)

# --- point states: Slurm's own words, plus four of hpcbench's for what Slurm cannot know ------------------
COMPLETED, FAILED, TIMEOUT, CANCELLED = "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"
NODE_FAIL, OUT_OF_MEMORY, PENDING, RUNNING = "NODE_FAIL", "OUT_OF_MEMORY", "PENDING", "RUNNING"
MISSING, UNPARSABLE, NOT_SUBMITTED, UNKNOWN = "MISSING", "UNPARSABLE", "NOT_SUBMITTED", "UNKNOWN"
STATES = (PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, NODE_FAIL, OUT_OF_MEMORY,
          MISSING, UNPARSABLE, NOT_SUBMITTED, UNKNOWN)
LIVE_STATES = frozenset({PENDING, RUNNING, UNKNOWN})
#: what `hpcbench resubmit` redoes unless told otherwise
RESUBMIT_DEFAULT = (FAILED, TIMEOUT, NODE_FAIL, CANCELLED)
#: what a re-run of the same sweep leaves alone: a live job or a result
KEEP_ON_RERUN = frozenset({COMPLETED, PENDING, RUNNING})

# Slurm's job states (squeue %T, sacct State), folded onto the point states above.
SLURM_ACTIVE = {"PENDING": PENDING, "CONFIGURING": PENDING, "REQUEUED": PENDING, "REQUEUE_HOLD": PENDING,
                "REQUEUE_FED": PENDING, "RESV_DEL_HOLD": PENDING, "RUNNING": RUNNING, "COMPLETING": RUNNING,
                "SUSPENDED": RUNNING, "STOPPED": RUNNING, "RESIZING": RUNNING, "STAGE_OUT": RUNNING,
                "SIGNALING": RUNNING}
SLURM_ENDED = {"COMPLETED": COMPLETED, "FAILED": FAILED, "TIMEOUT": TIMEOUT, "CANCELLED": CANCELLED,
               "NODE_FAIL": NODE_FAIL, "OUT_OF_MEMORY": OUT_OF_MEMORY, "PREEMPTED": CANCELLED,
               "DEADLINE": TIMEOUT, "BOOT_FAIL": NODE_FAIL, "REVOKED": CANCELLED, "SPECIAL_EXIT": FAILED}

# --- findings (doctor, check, the report): one scale, worst first -------------------------------------------
ERROR, WARNING, INFO, OK = "error", "warning", "info", "ok"
SEVERITIES = (ERROR, WARNING, INFO, OK)

# --- what a log of a job hpcbench did not launch gave ----------------------------------------------------------
PARSED, NO_RESULT, NOT_MEASURED = "parsed", "no result", "not measured"  # a measurement / a cut one / none at all
# A communication point whose ranks found that their library has no such collective: recorded, not failed.
UNSUPPORTED = "UNSUPPORTED"
