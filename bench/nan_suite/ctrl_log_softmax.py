"""Guarded version of log(softmax): F.log_softmax is stable for any finite logits."""
# expect: clean
# entry: loss
import torch
import torch.nn.functional as F


def loss(x, w, b):
    log_probs = F.log_softmax(x @ w + b, dim=-1)
    target = torch.tensor([0, 1, 2, 1])
    return -log_probs[torch.arange(4), target].mean()


def example_inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 8, generator=g), 0.1 * torch.randn(8, 3, generator=g), torch.zeros(3)
