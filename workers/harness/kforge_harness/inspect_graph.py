"""inspect: the module's computation graph as JSON, for policies to read.

Traced with torch.fx (module calls, functions and methods, with shapes from a real run); when
the module cannot be traced symbolically, the ATen operators of a real run are listed instead.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp
from torch.utils._python_dispatch import TorchDispatchMode

from kforge_harness.task import TaskError, load_task


def _meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).replace("torch.", "")}
    if isinstance(value, (list, tuple)):
        return [_meta(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _arg(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        return {"node": value.name}
    if isinstance(value, (list, tuple)):
        return [_arg(v) for v in value]
    if isinstance(value, dict):
        return {k: _arg(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    return repr(value)


def _module_attrs(mod: torch.nn.Module) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for k, v in vars(mod).items():
        if k.startswith("_") or k == "training":
            continue
        if v is None or isinstance(v, (bool, int, float, str)):
            attrs[k] = v
        elif isinstance(v, (tuple, list)) and all(isinstance(x, (bool, int, float, str)) for x in v):
            attrs[k] = list(v)
    attrs["training"] = mod.training
    return attrs


def _target_name(node: torch.fx.Node) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    mod = getattr(t, "__module__", None) or ""
    name = getattr(t, "__name__", repr(t))
    if mod.startswith("torch._ops") or "aten" in repr(t):
        return repr(t)
    mod = mod.replace("torch._C._nn", "torch.nn.functional").replace("torch._C._VariableFunctions", "torch")
    return f"{mod}.{name}" if mod and mod != "builtins" else name


def fx_graph(model: torch.nn.Module, args: list[Any]) -> dict[str, Any]:
    gm = torch.fx.symbolic_trace(model)
    ShapeProp(gm).propagate(*args)
    modules = dict(gm.named_modules())
    nodes = []
    for n in gm.graph.nodes:
        entry: dict[str, Any] = {
            "name": n.name,
            "op": n.op,
            "target": _target_name(n),
            "args": _arg(list(n.args)),
            "kwargs": _arg(dict(n.kwargs)),
        }
        tm = n.meta.get("tensor_meta")
        if tm is not None:
            entry["output"] = _meta_from_tm(tm)
        if n.op == "call_module":
            sub = modules[n.target]
            entry["module_type"] = type(sub).__name__
            entry["attrs"] = _module_attrs(sub)
            entry["parameters"] = {k: list(p.shape) for k, p in sub.named_parameters(recurse=False)}
        nodes.append(entry)
    return {"source": "fx", "nodes": nodes}


def _meta_from_tm(tm: Any) -> Any:
    if hasattr(tm, "shape"):
        return {"shape": list(tm.shape), "dtype": str(tm.dtype).replace("torch.", "")}
    if isinstance(tm, (list, tuple)):
        return [_meta_from_tm(t) for t in tm]
    if isinstance(tm, dict):
        return {k: _meta_from_tm(v) for k, v in tm.items()}
    return None


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[dict[str, Any]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.ops.append({"op": str(func), "args": _meta(list(args)), "output": _meta(out)})
        return out


def aten_graph(model: torch.nn.Module, args: list[Any]) -> dict[str, Any]:
    rec = _Recorder()
    with torch.no_grad(), rec:
        model(*args)
    return {"source": "aten", "nodes": rec.ops}


def _instantiate(path: str, backend: str, device: str) -> tuple[Any, torch.nn.Module, list[Any], Any]:
    task = load_task(path, backend)
    torch.manual_seed(0)
    with torch.device(device):
        model = task.model_class()(*task.get_init_inputs())
        args = task.get_inputs()
        with torch.no_grad():
            out = model(*args)
    return task, model, args, out


def inspect_task(path: str, backend: str = "cuda") -> dict[str, Any]:
    """The graph of the task's module at the backend's sizes, with parameters, inputs, outputs.

    It runs on the meta device (shapes and dtypes, nothing computed or allocated); a module
    whose control flow depends on values cannot run there, and runs on the CPU at the cpu
    backend's sizes instead (``"ran_on": "cpu"``).
    """
    try:
        task, model, args, out = _instantiate(path, backend, "meta")
        ran_on = "meta"
    except TaskError:
        raise
    except Exception:  # noqa: BLE001 - data-dependent code cannot run on meta tensors
        task, model, args, out = _instantiate(path, "cpu", "cpu")
        ran_on = "cpu"
    result: dict[str, Any] = {
        "task_sha256": task.sha256,
        "module": type(model).__name__,
        "ran_on": ran_on,
        "sizes_for": backend if ran_on == "meta" else "cpu",
        "init_inputs": _meta(task.get_init_inputs()),
        "inputs": _meta(args),
        "outputs": _meta(out),
        "parameters": [
            {"name": n, "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", "")}
            for n, p in model.named_parameters()
        ],
        "buffers": [
            {"name": n, "shape": list(b.shape), "dtype": str(b.dtype).replace("torch.", "")}
            for n, b in model.named_buffers()
        ],
    }
    try:
        result["graph"] = fx_graph(model, args)
    except Exception as e:  # noqa: BLE001 - fx cannot trace data-dependent control flow
        result["fx_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        result["graph"] = aten_graph(model, args)
    return result
