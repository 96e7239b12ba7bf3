"""The models a training point can run: ``build_model(name)`` for each name of the registry (vocab.MODELS)."""

from __future__ import annotations

from typing import Any

from hpcbench.vocab import LSTM_VOCAB, MODELS

LSTM_EMBED = 200
LSTM_HIDDEN = 200


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

        def forward(self, x):
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

        def forward(self, tokens):
            out, _ = self.lstm(self.embed(tokens))
            return self.head(out)  # (batch, seq, vocab): a prediction at every position

    return LstmLM()
