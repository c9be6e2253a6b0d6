"""Loading a KernelBench-format task file into a fresh module, in the judge's process.

A task defines ``class Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``. It may
also define, all optional:

* ``get_test_inputs()``: a list of further input lists (other shapes) for correctness checks;
* ``TOLERANCE = {"atol": float, "rtol": float}``: looser or tighter than the dtype's default;
* ``ALLOW_TF32 = True``: the task allows TF32 matrix arithmetic (off otherwise);
* sizes that depend on the backend, read from ``os.environ["KFORGE_BACKEND"]`` (cuda or cpu),
  which the harness sets before it loads the task.
"""

from __future__ import annotations

import hashlib
import os
import types
from dataclasses import dataclass, field
from typing import Any


class TaskError(Exception):
    """The task file cannot be used: it does not parse, lacks a name, or raises."""


@dataclass
class Task:
    """A loaded task. Owns its module object."""

    path: str
    source: str
    sha256: str
    backend: str
    module: types.ModuleType
    tolerance: dict[str, float] | None = None
    allow_tf32: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def model_class(self) -> type:
        return self.module.Model

    def get_inputs(self) -> list[Any]:
        return list(self.module.get_inputs())

    def get_init_inputs(self) -> list[Any]:
        return list(self.module.get_init_inputs())

    def get_test_inputs(self) -> list[list[Any]]:
        fn = getattr(self.module, "get_test_inputs", None)
        return [list(x) for x in fn()] if fn is not None else []


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def load_task(path: str, backend: str) -> Task:
    """Reads and executes the task at ``path`` with KFORGE_BACKEND set; raises TaskError."""
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"cannot read task: {e}") from e
    os.environ["KFORGE_BACKEND"] = backend
    module = types.ModuleType("kforge_task")
    module.__file__ = os.path.abspath(path)
    try:
        code = compile(source, path, "exec")
    except SyntaxError as e:
        raise TaskError(f"task does not parse: {e}") from e
    try:
        exec(code, module.__dict__)
    except BaseException as e:  # noqa: BLE001 - a task may raise anything, SystemExit included
        raise TaskError(f"task raised while loading: {type(e).__name__}: {e}") from e
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise TaskError(f"task defines no {name}")
    tol = getattr(module, "TOLERANCE", None)
    if tol is not None and not (
        isinstance(tol, dict) and all(isinstance(tol.get(k), (int, float)) for k in ("atol", "rtol"))
    ):
        raise TaskError("TOLERANCE must be a dict with numeric atol and rtol")
    return Task(
        path=os.path.abspath(path),
        source=source,
        sha256=source_hash(source),
        backend=backend,
        module=module,
        tolerance={k: float(tol[k]) for k in ("atol", "rtol")} if tol else None,
        allow_tf32=bool(getattr(module, "ALLOW_TF32", False)),
    )
