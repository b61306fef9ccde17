"""Poincare-ball distance: a point reaching the unit sphere divides by 1 - |u|^2 = 0."""
# expect: bug
# entry: poincare
import torch


def poincare(u, v):
    sq = ((u - v) ** 2).sum(-1)
    denom = (1 - (u ** 2).sum(-1)) * (1 - (v ** 2).sum(-1))
    return torch.acosh(1 + 2 * sq / denom)


def example_inputs():
    g = torch.Generator().manual_seed(13)
    return 0.3 * torch.rand(4, 2, generator=g), 0.3 * torch.rand(4, 2, generator=g)
