"""KernelBench's DenseNet121 dense block (level 3, 14_DenseNet121DenseBlock) in small: each layer
(BatchNorm2d in training mode, ReLU, a 3x3 convolution, Dropout(0.0)) reads the cat of every
feature so far, the last a cat of 13 tensors (more than the 8 cat once took)"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_layers: int, num_input_features: int, growth_rate: int):
        super().__init__()
        layers = []
        for i in range(num_layers):
            layers.append(self._make_layer(num_input_features + i * growth_rate, growth_rate))
        self.layers = nn.ModuleList(layers)

    def _make_layer(self, in_features: int, growth_rate: int):
        return nn.Sequential(
            nn.BatchNorm2d(in_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(in_features, growth_rate, kernel_size=3, padding=1, bias=False),
            nn.Dropout(0.0),
        )

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            new_feature = layer(x)
            features.append(new_feature)
            x = torch.cat(features, 1)
        return x


def get_inputs():
    return [torch.randn(2, 16, 12, 12)]


def get_init_inputs():
    return [12, 16, 4]
