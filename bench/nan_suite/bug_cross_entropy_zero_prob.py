"""Binary cross-entropy written by hand on sigmoid outputs: a saturated sigmoid gives log(0)."""
# expect: bug
import torch

torch.manual_seed(0)
features = torch.randn(8, 5)
weights = torch.randn(5)
labels = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
p = torch.sigmoid(features @ weights)
bce = -(labels * torch.log(p) + (1 - labels) * torch.log(1 - p)).mean()
print(bce)
