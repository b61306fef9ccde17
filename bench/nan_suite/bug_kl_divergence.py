"""KL(p || q) as sum p * log(p / q): q underflows to 0 and p / q is inf."""
# expect: bug
# entry: kl
import torch


def kl(logits_p, logits_q):
    p = torch.softmax(logits_p, dim=-1)
    q = torch.softmax(logits_q, dim=-1)
    return (p * torch.log(p / q)).sum(-1).mean()


def example_inputs():
    g = torch.Generator().manual_seed(10)
    return torch.randn(2, 5, generator=g), torch.randn(2, 5, generator=g)
