"""Gamma correction of a linear layer's output: a negative base to the power 1/2.2 is NaN."""
# expect: bug
# entry: gamma_correct
import torch


def gamma_correct(pixels, w):
    linear = pixels @ w
    return linear ** (1 / 2.2)


def example_inputs():
    g = torch.Generator().manual_seed(7)
    return torch.rand(5, 3, generator=g) + 0.2, torch.rand(3, 3, generator=g) + 0.2
