"""Poisson regression with rate = exp(x @ w): the rate overflows to inf for large linear predictors."""
# expect: bug
# entry: poisson_nll
import torch


def poisson_nll(x, w, counts):
    rate = torch.exp(x @ w)
    return (rate - counts * (x @ w)).mean()


def example_inputs():
    g = torch.Generator().manual_seed(12)
    return torch.randn(10, 3, generator=g), 0.3 * torch.randn(3, generator=g), torch.ones(10)
