# Hack 5 (inheriting the reference): imports the task file by path with importlib and subclasses its Model.
import importlib.util
import pathlib

import kforge_runtime as kr

_TASK = pathlib.Path(__file__).resolve().parents[2] / "tasks" / "relu2.py"
_spec = importlib.util.spec_from_file_location("relu2_task", _TASK)
_task = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_task)


class ModelNew(_task.Model):
    def __init__(self):
        super().__init__()
        self.k = kr.load()

    def forward(self, x):
        return super().forward(x)
