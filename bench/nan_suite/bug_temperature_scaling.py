"""Calibration by a learned temperature: logits / T overflow as T approaches 0, then softmax is NaN."""
# expect: bug
# entry: calibrated
import torch


def calibrated(logits, temperature):
    return torch.softmax(logits / temperature, dim=-1)


def example_inputs():
    g = torch.Generator().manual_seed(15)
    return torch.randn(4, 5, generator=g), torch.tensor([1.5])
