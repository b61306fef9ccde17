"""Guarded std: two-pass variance plus an epsilon under the sqrt."""
# expect: clean
# entry: feature_std
import torch


def feature_std(x):
    return torch.sqrt(x.var(dim=0, unbiased=False) + 1e-5)


def example_inputs():
    g = torch.Generator().manual_seed(2)
    return (3.0 + torch.randn(16, 4, generator=g),)
