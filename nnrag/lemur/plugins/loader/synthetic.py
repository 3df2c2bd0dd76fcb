"""A small, learnable image-classification set in LEMUR's loader interface, made on the spot (no
download): 10 classes of 3x32x32 images, each class a colour and a stripe orientation under noise.
A model that learns anything beats LEMUR's floor (1.2 x chance) in one epoch."""

import math

import torch
from torch.utils.data import Dataset

CLASSES = 10
MINIMUM_ACCURACY = 1.0 / CLASSES
_NORM = ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))


class SyntheticImages(Dataset):
    def __init__(self, count: int, seed: int, transform=None) -> None:
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.arange(count) % CLASSES
        colours = torch.stack([torch.tensor([math.cos(a), math.sin(a), math.cos(2 * a)])
                               for a in torch.arange(CLASSES) * (2 * math.pi / CLASSES)])
        ys, xs = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
        angles = torch.arange(CLASSES) * (math.pi / CLASSES)
        stripes = torch.stack([torch.sin((xs * a.cos() + ys * a.sin()) * 0.8) for a in angles])
        images = colours[self.labels].view(count, 3, 1, 1) + stripes[self.labels].unsqueeze(1)
        self.images = images + 0.6 * torch.randn(count, 3, 32, 32, generator=g)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        image = self.images[i]
        return (self.transform(image) if self.transform else image), self.labels[i]


def loader(transform_fn, task):
    transform = transform_fn(_NORM)
    return (CLASSES,), MINIMUM_ACCURACY, SyntheticImages(2000, 0, transform), SyntheticImages(500, 1, transform)
