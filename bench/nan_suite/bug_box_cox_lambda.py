"""Box-Cox transform (x**lam - 1) / lam with a learned lambda: lam reaching 0 divides by zero."""
# expect: bug
import torch

torch.manual_seed(0)
x = torch.rand(20) + 0.5
lam = torch.tensor([0.7, 0.4], requires_grad=True)
y = (x[:, None] ** lam - 1) / lam
print(y.mean())
