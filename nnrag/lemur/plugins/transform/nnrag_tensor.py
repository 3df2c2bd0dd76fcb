"""A LEMUR transform without torchvision: images (PIL, HWC arrays or CHW tensors) to normalised
float CHW tensors. Tensors pass through unchanged (the synthetic set is made normalised)."""

import numpy as np
import torch


def transform(norm):
    mean, std = (torch.tensor(v, dtype=torch.float32).view(-1, 1, 1) for v in norm)

    def apply(image):
        if isinstance(image, torch.Tensor):
            return image
        array = np.asarray(image, dtype=np.float32) / 255.0
        if array.ndim == 2:
            array = array[:, :, None]
        return (torch.from_numpy(array).permute(2, 0, 1) - mean) / std

    return apply
