"""Model registry. The table is plain data so that planning can validate names without torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelInfo:
    name: str
    input_shape: tuple[int, ...]  # one sample, channels first
    num_classes: int
    description: str


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo("mlp", (1, 28, 28), 10, "two-layer perceptron on 28x28 inputs; tiny, for smoke tests"),
        ModelInfo("mnist_cnn", (1, 28, 28), 10, "the CNN of Horovod's pytorch_mnist example"),
        ModelInfo("resnet18", (3, 224, 224), 1000, "torchvision ResNet-18, ImageNet shape"),
        ModelInfo("resnet50", (3, 224, 224), 1000, "torchvision ResNet-50, ImageNet shape"),
        ModelInfo("resnet101", (3, 224, 224), 1000, "torchvision ResNet-101, ImageNet shape"),
    )
}


def build_model(name: str) -> Any:
    """Return a freshly initialised ``torch.nn.Module`` for ``name`` (imports torch lazily)."""
    from torch import nn

    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    if name == "mnist_cnn":
        return _MnistCNN()
    if name.startswith("resnet"):
        import torchvision.models

        return getattr(torchvision.models, name)(weights=None, num_classes=MODELS[name].num_classes)
    raise KeyError(f"unknown model {name!r} (choose from: {', '.join(MODELS)})")


def _MnistCNN() -> Any:
    import torch.nn.functional as F
    from torch import nn

    class MnistCNN(nn.Module):
        # Same layers as horovod/examples/pytorch/pytorch_mnist.py.
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
            self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
            self.conv2_drop = nn.Dropout2d()
            self.fc1 = nn.Linear(320, 50)
            self.fc2 = nn.Linear(50, 10)

        def forward(self, x):  # type: ignore[no-untyped-def]
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 320)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, training=self.training)
            return F.log_softmax(self.fc2(x), dim=1)

    return MnistCNN()
