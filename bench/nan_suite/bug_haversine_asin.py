"""Haversine distance: asin(sqrt(h)) where rounding lets h exceed 1 for near-antipodal points."""
# expect: bug
# entry: haversine
import torch


def haversine(lat1, lon1, lat2, lon2):
    dlat, dlon = lat2 - lat1, lon2 - lon1
    h = torch.sin(dlat / 2) ** 2 + torch.cos(lat1) * torch.cos(lat2) * torch.sin(dlon / 2) ** 2
    return 2 * torch.asin(torch.sqrt(h))


def example_inputs():
    g = torch.Generator().manual_seed(18)
    return tuple(torch.rand(4, generator=g) for _ in range(4))
