"""Guarded binary cross-entropy: binary_cross_entropy_with_logits never takes log(0)."""
# expect: clean
import torch
import torch.nn.functional as F

torch.manual_seed(0)
features = torch.randn(8, 5)
weights = torch.randn(5)
labels = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
bce = F.binary_cross_entropy_with_logits(features @ weights, labels)
print(bce)
