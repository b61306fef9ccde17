"""Gaussian NLL with a learned variance that nothing keeps positive: dividing by it (or its log) blows up."""
# expect: bug
import torch

torch.manual_seed(0)
x = torch.randn(32, 4)
mu = torch.zeros(4, requires_grad=True)
var = torch.ones(4, requires_grad=True)
opt = torch.optim.SGD([mu, var], lr=0.05)
for _ in range(5):
    opt.zero_grad()
    nll = (0.5 * (x - mu) ** 2 / var + 0.5 * torch.log(var)).mean()
    nll.backward()
    opt.step()
print(float(nll))
