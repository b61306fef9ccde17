"""log(sigmoid(z)) instead of logsigmoid: sigmoid underflows to 0 for z below ~-88."""
# expect: bug
import torch

torch.manual_seed(0)
z = torch.randn(10)
log_p = torch.log(torch.sigmoid(3.0 * z))
print(log_p.sum())
