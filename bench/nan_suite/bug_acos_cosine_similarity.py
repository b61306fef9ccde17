"""Angle between embeddings as acos of a hand-made cosine similarity: rounding pushes it past 1."""
# expect: bug
# entry: angle
import torch


def angle(a, b):
    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
    return torch.acos(cos)


def example_inputs():
    g = torch.Generator().manual_seed(8)
    return torch.randn(4, 16, generator=g), torch.randn(4, 16, generator=g)
