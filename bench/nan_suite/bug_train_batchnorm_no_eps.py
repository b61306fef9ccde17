"""Training with a hand-written batch norm (h - mean) / sqrt(var) without eps: a dead ReLU unit has var 0."""
# expect: bug
# entry: train
# set: training
import torch


def train(x, y):
    g = torch.Generator().manual_seed(0)
    w1 = (0.5 * torch.rand(5, 8, generator=g) + 0.1).requires_grad_()  # every unit alive on positive data
    b1 = torch.zeros(8, requires_grad=True)
    w2 = (0.5 * torch.randn(8, 1, generator=g)).requires_grad_()
    opt = torch.optim.SGD([w1, b1, w2], lr=0.01)
    for _ in range(10):
        opt.zero_grad()
        h = torch.relu(x @ w1 + b1)
        h = (h - h.mean(0)) / torch.sqrt(h.var(0))
        loss = ((h @ w2).squeeze(-1) - y).pow(2).mean()
        loss.backward()
        opt.step()
    return loss


def example_inputs():
    g = torch.Generator().manual_seed(25)
    x = torch.rand(32, 5, generator=g) + 0.5
    return x, x.sum(-1)
