"""Guarded entropy: p * log_softmax, which is finite even where p underflows to 0."""
# expect: clean
import torch

torch.manual_seed(0)
policy = torch.nn.Linear(4, 3)
obs = torch.randn(6, 4)
logits = policy(obs) * 2.0
entropy = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1).mean()
print(entropy)
