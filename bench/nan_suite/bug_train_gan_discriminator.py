"""GAN discriminator trained on -log D(real) - log(1 - D(fake)) with a sigmoid output: once D saturates, log(0)."""
# expect: bug
# entry: train
# set: training
import torch


def train(real, noise):
    g = torch.Generator().manual_seed(0)
    gen = torch.nn.Linear(4, 3)
    disc = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    for module in (gen, disc[0], disc[2]):
        with torch.no_grad():
            module.weight.copy_(0.4 * torch.randn(module.weight.shape, generator=g))
            module.bias.zero_()
    opt_d = torch.optim.SGD(disc.parameters(), lr=0.05)
    opt_g = torch.optim.SGD(gen.parameters(), lr=0.05)
    for _ in range(8):
        fake = gen(noise)
        d_real, d_fake = torch.sigmoid(disc(real)), torch.sigmoid(disc(fake.detach()))
        loss_d = -(torch.log(d_real) + torch.log(1 - d_fake)).mean()
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        loss_g = -torch.log(torch.sigmoid(disc(gen(noise)))).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
    return loss_d + loss_g


def example_inputs():
    g = torch.Generator().manual_seed(23)
    return 1.0 + 0.3 * torch.randn(32, 3, generator=g), torch.randn(32, 4, generator=g)
