"""Guarded normalisation: the norm is clamped away from zero before dividing."""
# expect: clean
# entry: embed
import torch


def embed(x, w):
    h = torch.relu(x @ w)
    return h / h.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def example_inputs():
    g = torch.Generator().manual_seed(3)
    return torch.rand(4, 6, generator=g), torch.rand(6, 5, generator=g)
