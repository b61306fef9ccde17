"""Guarded learned variance: softplus plus an epsilon keeps it positive."""
# expect: clean
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(32, 4)
mu = torch.zeros(4, requires_grad=True)
raw = torch.zeros(4, requires_grad=True)
opt = torch.optim.SGD([mu, raw], lr=0.05)
for _ in range(5):
    opt.zero_grad()
    var = F.softplus(raw) + 1e-4
    nll = (0.5 * (x - mu) ** 2 / var + 0.5 * torch.log(var)).mean()
    nll.backward()
    opt.step()
print(float(nll))
