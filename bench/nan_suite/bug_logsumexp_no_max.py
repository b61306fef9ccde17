"""log(sum(exp(x))) without the max-subtraction trick overflows for logits above ~88 (float32)."""
# expect: bug
# entry: log_partition
import torch


def log_partition(logits):
    return torch.log(torch.exp(logits).sum(dim=-1))


def example_inputs():
    g = torch.Generator().manual_seed(4)
    return (2.0 * torch.randn(3, 7, generator=g),)
