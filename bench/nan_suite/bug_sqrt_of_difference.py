"""Standard deviation as sqrt(E[x^2] - E[x]^2): cancellation makes the difference negative, sqrt gives NaN."""
# expect: bug
# entry: feature_std
import torch


def feature_std(x):
    mean_sq = (x * x).mean(dim=0)
    sq_mean = x.mean(dim=0) ** 2
    return torch.sqrt(mean_sq - sq_mean)


def example_inputs():
    g = torch.Generator().manual_seed(2)
    return (3.0 + torch.randn(16, 4, generator=g),)
