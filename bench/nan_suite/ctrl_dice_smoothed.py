"""Guarded Dice loss: a smoothing constant in numerator and denominator (a scalar tensor eps is a constant)."""
# expect: clean
import torch

torch.manual_seed(0)
logits = torch.randn(1, 16)
mask = torch.zeros(1, 16)
smooth = torch.tensor(1.0)
pred = torch.sigmoid(logits)
dice = 1 - (2 * (pred * mask).sum() + smooth) / (pred.sum() + mask.sum() + smooth)
print(dice)
