"""Inverse softplus log(expm1(y)) for initialising a positive parameter: y <= 0 gives -inf/NaN."""
# expect: bug
# entry: inv_softplus
import torch


def inv_softplus(y):
    return torch.log(torch.expm1(y))


def example_inputs():
    g = torch.Generator().manual_seed(14)
    return (torch.rand(5, generator=g) + 0.5,)
