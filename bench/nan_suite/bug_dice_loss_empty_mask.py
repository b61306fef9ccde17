"""Dice loss without smoothing: an empty mask and a prediction near 0 divide 0 by 0."""
# expect: bug
import torch

torch.manual_seed(0)
logits = torch.randn(1, 16)
mask = torch.zeros(1, 16)
pred = torch.sigmoid(logits)
dice = 1 - 2 * (pred * mask).sum() / (pred.sum() + mask.sum())
print(dice)
