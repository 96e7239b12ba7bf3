"""Training data: synthetic tensors (the default for scaling runs), or MNIST / CIFAR-10 read by torchvision.

Jobs never download: they read ``data_dir``, which ``hpcbench data fetch`` fills on a login node
that has internet. Each rank reads its own shard (DistributedSampler), so an epoch is split over
the ranks as in any data-parallel training script.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hpcbench.errors import DataFetchError
from hpcbench.vocab import ModelInfo

# Normalisation constants of the torchvision / Horovod examples.
_NORMALIZE = {"mnist": ((0.1307,), (0.3081,)),
              "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))}


def dataset(name: str, root: str | Path, train: bool = True) -> Any:
    """The torchvision data set ``name`` under ``root``, never downloading."""
    import torchvision.datasets as tvd
    import torchvision.transforms as T

    mean, std = _NORMALIZE[name]
    transform = T.Compose([T.ToTensor(), T.Normalize(mean, std)])
    root = str(root)
    if name == "mnist":
        return tvd.MNIST(root, train=train, download=False, transform=transform)
    if name == "cifar10":
        return _cifar10_class()(root, train=train, download=False, transform=transform)
    raise KeyError(f"unknown data set {name!r}")


def _cifar10_class() -> type:
    import torchvision.datasets as tvd

    class CIFAR10(tvd.CIFAR10):
        # torchvision re-hashes every batch file on each open (md5 of 170 MB per rank per job).
        # `hpcbench data fetch` checked the archive once at download; the pickles are read as is.
        train_list = [[f, None] for f, _ in tvd.CIFAR10.train_list]  # noqa: RUF012 (torchvision's shape)
        test_list = [[f, None] for f, _ in tvd.CIFAR10.test_list]  # noqa: RUF012
        meta = {**tvd.CIFAR10.meta, "md5": None}  # noqa: RUF012

    return CIFAR10


def batches(data: str, data_dir: str | None, info: ModelInfo, batch_size: int, rank: int, world: int,
            device: Any, seed: int = 0) -> Iterator[tuple[Any, Any]]:
    """Endless (inputs, targets) batches for one rank, already on ``device``."""
    import torch

    if data == "synthetic":
        # One fixed batch per rank: the input pipeline is left out of the measurement on purpose.
        gen = torch.Generator().manual_seed(1000 + rank)
        if info.tokens:
            x = torch.randint(0, info.num_classes, (batch_size, *info.input_shape), generator=gen)
            y = torch.randint(0, info.num_classes, (batch_size, *info.input_shape), generator=gen)
        else:
            x = torch.randn((batch_size, *info.input_shape), generator=gen)
            y = torch.randint(0, info.num_classes, (batch_size,), generator=gen)
        x, y = x.to(device), y.to(device)
        while True:
            yield x, y
    if data_dir is None:
        raise ValueError(f"data {data!r} needs a data_dir")
    from torch.utils.data import DataLoader, DistributedSampler

    ds = dataset(data, data_dir)
    sampler: DistributedSampler[Any] = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=seed,
                                                          drop_last=True)
    if len(sampler) < batch_size:
        raise ValueError(f"{data} in {data_dir}: {len(ds)} samples give {len(sampler)} per rank, "
                         f"fewer than one batch of {batch_size}")
    loader = DataLoader(ds, batch_size=batch_size, sampler=sampler, drop_last=True, num_workers=0,
                        pin_memory=getattr(device, "type", "cpu") == "cuda")
    epoch = 0
    while True:
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        for x, y in loader:
            yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        epoch += 1


def fetch(name: str, dest: str | Path) -> Path:
    """Download ``name`` into ``dest`` with torchvision (on a machine with internet)."""
    import torchvision.datasets as tvd

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    cls = {"mnist": tvd.MNIST, "cifar10": tvd.CIFAR10}[name]
    try:
        for train in (True, False):
            cls(str(dest), train=train, download=True)
    except Exception as e:  # noqa: BLE001  urllib, socket and torchvision's own errors all mean "could not download"
        lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()] or [type(e).__name__]
        # torchvision's message is "Error downloading X:" then one line per mirror; the last says why.
        why = lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}"
        raise DataFetchError(f"cannot download {name} into {dest}: {why}",
                             hint="run 'hpcbench data fetch' on a login node with internet, "
                                  "then point workload.data_dir at the same folder") from None
    return dest
