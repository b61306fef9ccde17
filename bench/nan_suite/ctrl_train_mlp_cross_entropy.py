"""Guarded: the same ReLU MLP training on standardized features, with F.cross_entropy (stable for any logits)."""
# expect: clean
# entry: train
# set: training
import torch
import torch.nn.functional as F


def train(x):
    g = torch.Generator().manual_seed(0)
    w1 = (0.3 * torch.randn(8, 16, generator=g)).requires_grad_()
    w2 = (0.3 * torch.randn(16, 4, generator=g)).requires_grad_()
    y = torch.arange(x.shape[0]) % 4
    x = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-5)  # bounded features, any scale
    for _ in range(15):
        loss = F.cross_entropy(torch.relu(x @ w1) @ w2, y)
        loss.backward()
        with torch.no_grad():
            for p in (w1, w2):
                p -= 0.5 * p.grad
                p.grad = None
    return loss


def example_inputs():
    g = torch.Generator().manual_seed(21)
    return (torch.randn(32, 8, generator=g),)
