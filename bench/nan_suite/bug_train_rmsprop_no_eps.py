"""A hand-written RMSprop step g / sqrt(v) without eps: a weight whose gradient is exactly 0 gets 0 / 0."""
# expect: bug
# entry: train
# set: training
import torch


def train(x, y):
    g = torch.Generator().manual_seed(0)
    w1 = (0.5 * torch.rand(4, 6, generator=g) + 0.1).requires_grad_()  # every unit alive on positive data
    w2 = (0.5 * torch.randn(6, generator=g)).requires_grad_()
    v1, v2 = torch.zeros_like(w1), torch.zeros_like(w2)
    for _ in range(10):
        loss = ((torch.relu(x @ w1) @ w2 - y) ** 2).mean()
        g1, g2 = torch.autograd.grad(loss, [w1, w2])
        with torch.no_grad():
            v1 = 0.9 * v1 + 0.1 * g1 ** 2
            v2 = 0.9 * v2 + 0.1 * g2 ** 2
            w1 -= 0.01 * g1 / torch.sqrt(v1)
            w2 -= 0.01 * g2 / torch.sqrt(v2)
    return loss


def example_inputs():
    g = torch.Generator().manual_seed(26)
    x = torch.rand(16, 4, generator=g) + 0.2
    return x, x.sum(-1)
