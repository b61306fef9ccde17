"""Whitening hidden features by the reciprocal of their batch std: a dead ReLU column has std 0."""
# expect: bug
# entry: whiten
import torch


def whiten(x, w):
    h = torch.relu(x @ w)
    inv_std = torch.reciprocal(h.std(dim=0))
    return (h - h.mean(dim=0)) * inv_std


def example_inputs():
    g = torch.Generator().manual_seed(6)
    return torch.rand(8, 4, generator=g) + 0.5, torch.rand(4, 3, generator=g) + 0.1
