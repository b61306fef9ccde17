"""Training an MLP classifier with a hand-written loss -log(softmax(logits)): large features saturate it, log(0)."""
# expect: bug
# entry: train
# set: training
import torch


def train(x):
    g = torch.Generator().manual_seed(0)
    w1 = (0.3 * torch.randn(8, 16, generator=g)).requires_grad_()
    w2 = (0.3 * torch.randn(16, 4, generator=g)).requires_grad_()
    y = torch.arange(x.shape[0]) % 4
    for _ in range(15):
        probs = torch.softmax(torch.relu(x @ w1) @ w2, dim=-1)
        loss = -torch.log(probs[torch.arange(x.shape[0]), y]).mean()
        loss.backward()
        with torch.no_grad():
            for p in (w1, w2):
                p -= 0.5 * p.grad
                p.grad = None
    return loss


def example_inputs():
    g = torch.Generator().manual_seed(21)
    return (torch.randn(32, 8, generator=g),)
