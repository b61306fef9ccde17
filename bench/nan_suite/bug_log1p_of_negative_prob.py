"""log(1 - p) written as log1p(-p) is still -inf once the sigmoid rounds p to 1."""
# expect: bug
# entry: survival_log_lik
import torch


def survival_log_lik(x, beta):
    p = torch.sigmoid(x @ beta)
    return torch.log1p(-p).sum()


def example_inputs():
    g = torch.Generator().manual_seed(11)
    return torch.randn(6, 3, generator=g), 0.5 * torch.randn(3, generator=g)
