"""Normalising ReLU features by their L2 norm: a row whose units are all dead has norm 0, 0/0 = NaN."""
# expect: bug
# entry: embed
import torch


def embed(x, w):
    h = torch.relu(x @ w)
    return h / h.norm(dim=-1, keepdim=True)


def example_inputs():
    g = torch.Generator().manual_seed(3)
    return torch.rand(4, 6, generator=g), torch.rand(6, 5, generator=g)
