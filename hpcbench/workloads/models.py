"""Model registry. The table is plain data so that planning can validate names without torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LSTM_VOCAB = 10000  # the Penn Treebank vocabulary size of the classic word-level LM
LSTM_SEQ_LEN = 35
LSTM_EMBED = 200
LSTM_HIDDEN = 200


@dataclass(frozen=True)
class ModelInfo:
    name: str
    input_shape: tuple[int, ...]  # one sample, channels first
    num_classes: int  # for a language model: the vocabulary, predicted at every position
    description: str
    tokens: bool = False  # input is token ids of shape input_shape (sequence length), not floats


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo("mlp", (1, 28, 28), 10, "two-layer perceptron on 28x28 inputs; tiny, for smoke tests"),
        ModelInfo("mnist_cnn", (1, 28, 28), 10, "the CNN of Horovod's pytorch_mnist example"),
        ModelInfo("resnet18", (3, 224, 224), 1000, "torchvision ResNet-18, ImageNet shape"),
        ModelInfo("resnet50", (3, 224, 224), 1000, "torchvision ResNet-50, ImageNet shape"),
        ModelInfo("resnet101", (3, 224, 224), 1000, "torchvision ResNet-101, ImageNet shape"),
        ModelInfo("cifar_resnet18", (3, 32, 32), 10, "ResNet-18 for CIFAR-10: 3x3 stem, no max-pool"),
        ModelInfo("lstm_lm", (LSTM_SEQ_LEN,), LSTM_VOCAB, "LSTM language model: embedding, 2-layer LSTM, "
                  "linear over the vocabulary; few FLOPs per parameter, so communication weighs more than in CNNs",
                  tokens=True),
    )
}

# One sample of each real data set, as the models above take it.
DATASET_SHAPES: dict[str, tuple[int, ...]] = {"mnist": (1, 28, 28), "cifar10": (3, 32, 32)}


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
    if name == "cifar_resnet18":
        import torchvision.models

        net = torchvision.models.resnet18(weights=None, num_classes=10)
        # 32x32 inputs: the ImageNet stem (7x7/2 conv + max-pool) would shrink them to 8x8 at once.
        net.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        net.maxpool = nn.Identity()
        return net
    if name == "lstm_lm":
        return _LstmLM()
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


def _LstmLM() -> Any:
    from torch import nn

    class LstmLM(nn.Module):
        # The "small" word-level LM of Zaremba et al. / PyTorch's word_language_model example.
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(LSTM_VOCAB, LSTM_EMBED)
            self.lstm = nn.LSTM(LSTM_EMBED, LSTM_HIDDEN, num_layers=2, batch_first=True)
            self.head = nn.Linear(LSTM_HIDDEN, LSTM_VOCAB)

        def forward(self, tokens):  # type: ignore[no-untyped-def]
            out, _ = self.lstm(self.embed(tokens))
            return self.head(out)  # (batch, seq, vocab): a prediction at every position

    return LstmLM()
