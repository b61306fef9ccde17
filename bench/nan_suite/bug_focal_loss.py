"""Focal loss (1 - p)^gamma * log(p) on a softmax probability: log(0) once the softmax saturates."""
# expect: bug
# entry: focal
import torch


def focal(logits, target):
    p = torch.softmax(logits, dim=-1).gather(1, target[:, None]).squeeze(1)
    return (-(1 - p) ** 2 * torch.log(p)).mean()


def example_inputs():
    g = torch.Generator().manual_seed(16)
    return torch.randn(6, 4, generator=g), torch.tensor([0, 1, 2, 3, 0, 1])
