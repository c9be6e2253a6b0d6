"""KernelBench's NetVLAD with ghost clusters (level 3, 46_NetVladWithGhostClusters) in small:
a device check that raises (`if x.device != self.clusters.device`, read as equal: the judge runs
module and inputs on one device), matmul, BatchNorm1d in training mode, softmax, a slice of the
clusters, sums, transposed products, F.normalize twice"""

import math

import torch
import torch as th
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, cluster_size, feature_size, ghost_clusters):
        super().__init__()
        self.feature_size = feature_size
        self.cluster_size = cluster_size
        self.ghost_clusters = ghost_clusters
        init_sc = 1 / math.sqrt(feature_size)
        clusters = cluster_size + ghost_clusters
        self.clusters = nn.Parameter(init_sc * th.randn(feature_size, clusters))
        self.batch_norm = nn.BatchNorm1d(clusters)
        self.clusters2 = nn.Parameter(init_sc * th.randn(1, feature_size, cluster_size))
        self.out_dim = self.cluster_size * feature_size

    def forward(self, x, mask=None):
        max_sample = x.size()[1]
        x = x.view(-1, self.feature_size)
        if x.device != self.clusters.device:
            msg = f"x.device {x.device} != cluster.device {self.clusters.device}"
            raise ValueError(msg)
        assignment = th.matmul(x, self.clusters)
        assignment = self.batch_norm(assignment)
        assignment = F.softmax(assignment, dim=1)
        assignment = assignment[:, : self.cluster_size]
        assignment = assignment.view(-1, max_sample, self.cluster_size)
        a_sum = th.sum(assignment, dim=1, keepdim=True)
        a = a_sum * self.clusters2
        assignment = assignment.transpose(1, 2)
        x = x.view(-1, max_sample, self.feature_size)
        vlad = th.matmul(assignment, x)
        vlad = vlad.transpose(1, 2)
        vlad = vlad - a
        vlad = F.normalize(vlad)
        vlad = vlad.reshape(-1, self.cluster_size * self.feature_size)
        vlad = F.normalize(vlad)
        return vlad


def get_inputs():
    return [torch.randn(4, 20, 64)]


def get_init_inputs():
    return [8, 64, 4]
