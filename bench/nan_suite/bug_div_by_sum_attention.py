"""ReLU attention normalised by its row sum: an all-zero row divides 0 by 0."""
# expect: bug
# entry: relu_attention
import torch


def relu_attention(q, k, v):
    scores = torch.relu(q @ k.T)
    weights = scores / scores.sum(dim=-1, keepdim=True)
    return weights @ v


def example_inputs():
    g = torch.Generator().manual_seed(9)
    return torch.rand(3, 4, generator=g), torch.rand(5, 4, generator=g), torch.randn(5, 2, generator=g)
