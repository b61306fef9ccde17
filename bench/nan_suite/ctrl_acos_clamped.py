"""Guarded angle: the cosine similarity has an epsilon and is clamped inside (-1, 1) before acos."""
# expect: clean
# entry: angle
import torch
import torch.nn.functional as F


def angle(a, b):
    cos = F.cosine_similarity(a, b, dim=-1, eps=1e-8)
    return torch.acos(cos.clamp(-1 + 1e-6, 1 - 1e-6))


def example_inputs():
    g = torch.Generator().manual_seed(8)
    return torch.randn(4, 16, generator=g), torch.randn(4, 16, generator=g)
