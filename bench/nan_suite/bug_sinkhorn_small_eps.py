"""Sinkhorn iterations with a small entropic epsilon: exp(-C/eps) underflows, the scaling divides by 0."""
# expect: bug
# entry: sinkhorn
import torch


def sinkhorn(x, y):
    cost = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    kernel = torch.exp(-cost / 0.05)
    a = torch.full((x.shape[0],), 1.0 / x.shape[0])
    b = torch.full((y.shape[0],), 1.0 / y.shape[0])
    v = torch.ones(y.shape[0])
    for _ in range(3):
        u = a / (kernel @ v)
        v = b / (kernel.T @ u)
    return (u[:, None] * kernel * v[None, :] * cost).sum()


def example_inputs():
    g = torch.Generator().manual_seed(17)
    return 0.3 * torch.randn(4, 2, generator=g), 0.3 * torch.randn(5, 2, generator=g)
