import time

time.sleep(3600)
import kforge_runtime as kr
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()
