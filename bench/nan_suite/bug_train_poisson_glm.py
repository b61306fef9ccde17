"""Poisson GLM fitted by gradient descent with rate = exp(x @ w): larger covariates overflow the rate to inf."""
# expect: bug
# entry: fit
# set: training
import torch


def fit(x, counts):
    w = torch.zeros(x.shape[1], requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.02)
    for _ in range(25):
        opt.zero_grad()
        rate = torch.exp(x @ w)
        loss = (rate - counts * (x @ w)).mean()
        loss.backward()
        opt.step()
    return w


def example_inputs():
    g = torch.Generator().manual_seed(24)
    x = torch.randn(64, 5, generator=g)
    return x, torch.poisson(torch.exp(0.3 * x[:, 0]), generator=g)
