"""Inverting a tanh squashing with atanh: tanh rounds to exactly 1.0 for |x| > ~9, atanh(1) = inf."""
# expect: bug
# entry: unsquash
import torch


def unsquash(pre_action):
    action = torch.tanh(pre_action)
    return torch.atanh(action)


def example_inputs():
    g = torch.Generator().manual_seed(5)
    return (torch.randn(6, generator=g),)
