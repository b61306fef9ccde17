"""Heteroscedastic regression: a linear head predicts the variance with nothing keeping it positive; log(var) is NaN."""
# expect: bug
# entry: train
# set: training
import torch


def train(x, y):
    g = torch.Generator().manual_seed(0)
    w_mu = (0.1 * torch.randn(6, generator=g)).requires_grad_()
    w_var = (0.1 * torch.randn(6, generator=g)).requires_grad_()
    b_var = torch.tensor(1.0, requires_grad=True)
    opt = torch.optim.SGD([w_mu, w_var, b_var], lr=0.01)
    for _ in range(20):
        opt.zero_grad()
        mu = x @ w_mu
        var = x @ w_var + b_var
        nll = (torch.log(var) + (y - mu) ** 2 / var).mean()
        nll.backward()
        opt.step()
    return nll


def example_inputs():
    g = torch.Generator().manual_seed(22)
    x = 0.5 * torch.randn(64, 6, generator=g)
    return x, x.sum(-1) + 0.1 * torch.randn(64, generator=g)
