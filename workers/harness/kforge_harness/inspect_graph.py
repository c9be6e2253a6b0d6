"""inspect: the module's computation graph as JSON, for policies to read.

Traced with torch.fx (module calls, functions and methods, with shapes from a real run); when
the module cannot be traced symbolically, the ATen operators of a real run are listed instead.
"""

from __future__ import annotations

import copy
import inspect
import math
import types
from typing import Any

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp
from torch.utils._python_dispatch import TorchDispatchMode

from kforge_harness.decompose import tracer_class
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
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}  # JSON has no infinity: {"float": "-inf"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    return repr(value)


def _slice_by_size(graph: torch.fx.Graph) -> bool:
    """Whether a node's arguments hold a slice bounded by a traced size (``self.bias[:, :, :t,
    :t]``, which traces symbolically once buffers are proxies): a policy reads slices as
    numbers, so such a module is traced with its sizes fixed, as before buffers were."""

    def walk(a: Any) -> bool:
        if isinstance(a, slice):
            return any(isinstance(b, torch.fx.Node) for b in (a.start, a.stop, a.step))
        if isinstance(a, (list, tuple)):
            return any(walk(b) for b in a)
        if isinstance(a, dict):
            return any(walk(b) for b in a.values())
        return False

    return any(walk(n.args) or walk(n.kwargs) for n in graph.nodes)


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


def _defaults_beyond(model: torch.nn.Module, n: int) -> dict[str, Any]:
    """forward()'s parameters after the n that get_inputs() gives, with their defaults
    (``initial_states=None``, Mamba2's): traced as those constants, as every call passes them,
    not as inputs that a ``None`` check would read as given."""
    params = list(inspect.signature(model.forward).parameters.values())[n:]
    return {q.name: q.default for q in params if q.default is not inspect.Parameter.empty}


def _drop_constant_placeholders(graph: torch.fx.Graph, n: int) -> None:
    """Remove what tracing with constants leaves: a placeholder after the first n, and fx's
    checks that the call passes that constant (``_assert_is_none``; ``torch._assert`` of an
    ``eq``), which read nothing else."""
    extra = [node for node in graph.nodes if node.op == "placeholder"][n:]
    for node in reversed(list(graph.nodes)):
        name = getattr(node.target, "__name__", "")
        check = node.op == "call_function" and name in ("_assert_is_none", "_assert")
        if check and all(a in extra or a.users.keys() <= {node} for a in node.all_input_nodes):
            inputs = node.all_input_nodes
            graph.erase_node(node)
            for a in inputs:  # the eq between the placeholder and its value
                if a not in extra and not a.users:
                    graph.erase_node(a)
    for node in extra:
        if not node.users:
            graph.erase_node(node)


def _trace_with_sizes(model: torch.nn.Module, args: list[Any], rest: dict[str, Any]) -> torch.fx.Graph:
    """Trace with every tensor's size known: ``x.size()``, ``x.shape`` and ``x.dim()`` give
    this run's numbers, so code that slices by a size (``self.bias[:, :, :T, :T]``, minGPT's
    causal mask) traces. Buffers stay nodes (``get_attr``), not tensors folded into constants,
    so what is computed from them is in the graph with the rest."""
    from torch.fx.experimental import meta_tracer  # noqa: PLC0415 - only for the fallback

    names = [n for n in inspect.signature(model.forward).parameters][: len(args)]

    class SizedProxy(meta_tracer.MetaProxy):  # type: ignore[misc]
        def size(self, dim: Any = None) -> Any:  # MetaProxy's reads x.size(0) as x.size()
            meta = getattr(self, "_tensor_meta", None)
            if dim is None or meta is None:
                return super().size(dim)
            return meta.size(dim)

    class Sized(tracer_class(meta_tracer.MetaTracer)):  # type: ignore[misc]
        def proxy(self, node: torch.fx.Node) -> Any:
            return SizedProxy(node, self)

    tracer = Sized()
    tracer.proxy_buffer_attributes = True
    # the constructors it records as calls, torch.full too (its device kwarg-only, as theirs)
    tracer._TORCH_METHODS_TO_PATCH = [*meta_tracer.MetaTracer._TORCH_METHODS_TO_PATCH, "full"]
    meta = {n: a.to("meta") if isinstance(a, torch.Tensor) else a for n, a in zip(names, args)}
    return tracer.trace(model, meta, concrete_args=rest or None)


def _constant_value(gm: torch.fx.GraphModule, target: str) -> Any:
    """The number a one-element tensor constant holds (torch.tensor(0.5) made in forward(),
    which fx keeps as an attribute of its own), or None: a policy needs its value, since the
    module it reads its parameters from does not have it."""
    t: Any = gm
    for part in target.split("."):
        t = getattr(t, part, None)
    if not isinstance(t, torch.Tensor) or t.numel() != 1 or t.is_meta:
        return None
    return t.item()


class _Prop(ShapeProp):
    """ShapeProp that also keeps each Python number a node computes (``x.size(2) - y.size(2)``)
    in ``meta["kf_number"]``: a policy that bakes a pad or a split size into a kernel needs the
    number, which the graph holds only as the operations that make it."""

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if isinstance(result, (int, float)) and not isinstance(result, bool):
            n.meta["kf_number"] = result
        return result


def _restore_assigned(traced: torch.nn.Module, model: torch.nn.Module) -> list[dict[str, Any]]:
    """Put back the attributes a traced forward assigned a proxy to, from the untraced module:
    the graph reads them (``get_attr``) with the values the module was built with. Returns
    what forward() assigned ({"name", "node", "from_inputs"}): an attribute whose new value
    depends on the inputs is state a later call reads (KernelBench's VanillaRNN keeps its
    hidden state so), which no plan of one call holds; one moved to the input's device
    (``self.h0 = self.h0.to(x.device)``) is the same values at every call."""
    originals = dict(model.named_modules())
    assigned = []
    for name, mod in traced.named_modules():
        source = originals.get(name)
        for k, v in list(vars(mod).items()):
            if isinstance(v, torch.fx.Proxy) and source is not None and k in vars(source):
                setattr(mod, k, vars(source)[k])
                assigned.append({"name": f"{name}.{k}" if name else k, "node": v.node.name,
                                 "from_inputs": _reads_inputs(v.node)})  # fmt: skip
    return assigned


def _reads_inputs(node: torch.fx.Node) -> bool:
    """Whether node's value depends on a placeholder other than through its device or shape."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "placeholder":
            return True
        if n.op == "call_function" and n.target is getattr and n.args[1] in ("device", "dtype", "shape"):
            continue
        if n.op == "call_method" and n.target in ("to", "type_as") and isinstance(n.args[0], torch.fx.Node):
            todo.append(n.args[0])  # the other operand gives a device or a dtype, not values
            continue
        todo.extend(n.all_input_nodes)
    return False


def module_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of model whose functions kept as attributes call the copy's submodules.
    copy.deepcopy keeps a function as it is, so minGPT's ``self.mlpf = lambda x:
    m.c_proj(m.act(m.c_fc(x)))`` would still reach the original's modules through its closure,
    which a trace of the copy does not own ("module is not installed as a submodule")."""
    memo: dict[int, Any] = {}
    root = copy.deepcopy(model, memo)
    for mod in root.modules():
        for name, f in list(vars(mod).items()):
            if not isinstance(f, types.FunctionType) or not f.__closure__:
                continue
            cells = tuple(
                types.CellType(memo.get(id(c.cell_contents), c.cell_contents)) for c in f.__closure__
            )
            g = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, cells)
            g.__kwdefaults__ = f.__kwdefaults__
            object.__setattr__(mod, name, g)
    return root


def fx_graph(model: torch.nn.Module, args: list[Any]) -> dict[str, Any]:
    """The module traced symbolically; where that fails (a size used as a number), traced again
    with sizes fixed to this run's (``"sizes": "fixed"``: the graph holds only for these
    shapes, as every plan built from it does). Each trace runs on a copy: a forward that
    assigns to its module (``self.h0 = self.h0.to(x.device)``) leaves a proxy there."""
    sizes = "symbolic"
    root = module_copy(model)
    rest = _defaults_beyond(model, len(args))
    try:
        tracer = tracer_class(torch.fx.Tracer)()
        # what forward() computes from a buffer (Swin's self.index.view(-1)) is in the graph,
        # not folded into a constant that the module does not own
        tracer.proxy_buffer_attributes = True
        graph = tracer.trace(root, concrete_args=rest or None)
        if _slice_by_size(graph):
            raise torch.fx.proxy.TraceError("a slice bounded by a traced size")
    except Exception:  # noqa: BLE001 - e.g. slice indices that are proxies of x.size()
        root = module_copy(model)
        graph = _trace_with_sizes(root, args, rest)
        sizes = "fixed"
    if rest:
        _drop_constant_placeholders(graph, len(args))
    assigned = _restore_assigned(root, model)
    gm = torch.fx.GraphModule(root, graph, type(model).__name__)
    _Prop(gm).propagate(*args)
    modules = dict(gm.named_modules())
    owned = {n for n, _ in model.named_parameters()} | {n for n, _ in model.named_buffers()}
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
        if "kf_number" in n.meta:  # a size or a number computed from sizes, as this run had it
            entry["value"] = _arg(n.meta["kf_number"])
        if n.op == "get_attr" and n.target not in owned:
            value = _constant_value(gm, n.target)
            if value is not None:
                entry["value"] = _arg(value)
        if n.op == "call_module":
            sub = modules[n.target]
            entry["module_type"] = type(sub).__name__
            entry["attrs"] = _module_attrs(sub)
            entry["parameters"] = {k: list(p.shape) for k, p in sub.named_parameters(recurse=False)}
        nodes.append(entry)
    return {"source": "fx", "sizes": sizes, "nodes": nodes, "assigns": assigned}


def _strided(shape: Any, stride: Any) -> bool:
    """Whether a tensor of these strides is not laid out contiguously (dims of size 1 aside)."""
    run = 1
    for n, s in zip(reversed(list(shape)), reversed(list(stride))):
        if n != 1 and s != run:
            return True
        run *= n
    return False


def _meta_from_tm(tm: Any) -> Any:
    if hasattr(tm, "shape"):
        meta = {"shape": list(tm.shape), "dtype": str(tm.dtype).replace("torch.", "")}
        stride = getattr(tm, "stride", None)
        if stride is not None and _strided(tm.shape, stride):  # a transposed or sliced view
            meta["stride"] = list(stride)
        return meta
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
    """The task, its module as __init__ left it, the inputs, and the output of one call. The
    call runs on a copy: a forward that assigns to its module (KernelBench's ``self.c0 =
    self.h0.to(x.device)``) would otherwise leave two attributes one tensor, which the trace
    could only name as one of them."""
    task = load_task(path, backend)
    torch.manual_seed(0)
    with torch.device(device):
        model = task.model_class()(*task.get_init_inputs())
        args = task.get_inputs()
        called = module_copy(model)
        with torch.no_grad():
            out = called(*args)
    return task, model, args, out


def _unowned_tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The tensors the module's __init__ kept as plain attributes (not parameters or buffers,
    so not in its state_dict), by dotted name, in the order each module assigned them."""
    found = []
    for prefix, mod in model.named_modules():
        for k, v in vars(mod).items():
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                found.append((f"{prefix}.{k}" if prefix else k, v))
    return found


_REPLAY_SEED = 20261205


def init_draws(task: Any, meta_model: torch.nn.Module) -> list[dict[str, Any]]:
    """How __init__ made the tensors it does not own, for a candidate to make them again.

    KernelBench's recurrent tasks draw their initial states first (``self.h0 =
    torch.randn(...)``): no state_dict carries them, and the judge builds both modules after
    the same manual_seed, so a candidate whose __init__ draws the same shapes in the same order
    first holds the same values. The module is built again on the CPU (only when it has such
    tensors) and each tensor compared with a replay from the same seed: zeros, ones, or the next
    randn or rand draw. The list stops at the first tensor made otherwise (what follows could
    not be replayed), and is empty when there is none."""
    unowned = _unowned_tensors(meta_model)
    if not unowned:
        return []
    torch.manual_seed(_REPLAY_SEED)
    try:
        real = task.model_class()(*task.get_init_inputs())
    except Exception:  # noqa: BLE001 - an __init__ that cannot run on the CPU: nothing replayable
        return []
    gen = torch.Generator().manual_seed(_REPLAY_SEED)
    draws: list[dict[str, Any]] = []
    for name, t in _unowned_tensors(real):
        if t.dtype != torch.float32 or t.is_meta or t.device.type != "cpu":
            break
        fn = None
        if not torch.any(t):
            fn = "zeros"
        elif bool(torch.all(t == 1)):
            fn = "ones"
        else:
            state = gen.get_state()
            for draw in (torch.randn, torch.rand):
                gen.set_state(state)
                if torch.equal(draw(tuple(t.shape), generator=gen), t):
                    fn = draw.__name__
                    break
        if fn is None:
            break
        draws.append({"name": name, "fn": fn, "shape": list(t.shape)})
    return draws


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
    result["init_draws"] = init_draws(task, model)
    try:
        result["graph"] = fx_graph(model, args)
    except Exception as e:  # noqa: BLE001 - fx cannot trace data-dependent control flow
        result["fx_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        result["graph"] = aten_graph(model, args)
    return result
