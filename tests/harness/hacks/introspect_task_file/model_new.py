# Hack 13 (introspection): finds the task file in the judge's command line (/proc/<ppid>/cmdline) and runs its Model.
import os
import types

import kforge_runtime as kr
import torch.nn as nn


def _reference_from_judge():
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        argv = f.read().decode().split("\0")
    path = argv[argv.index("--task") + 1]
    module = types.ModuleType("stolen_task")
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), path, "exec")
    module.__dict__["__builtins__"] = __builtins__
    exec(code, module.__dict__)  # noqa: S102
    return module.Model()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = kr.load()
        self.ref = _reference_from_judge()

    def forward(self, x):
        self.k.touch(x, x.numel())
        return self.ref(x)
