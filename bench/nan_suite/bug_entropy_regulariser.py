"""Entropy bonus -sum p log p of a policy: a saturated softmax makes 0 * log(0) = NaN."""
# expect: bug
import torch

torch.manual_seed(0)
policy = torch.nn.Linear(4, 3)
obs = torch.randn(6, 4)
p = torch.softmax(policy(obs) * 2.0, dim=-1)
entropy = -(p * torch.log(p)).sum(-1).mean()
print(entropy)
