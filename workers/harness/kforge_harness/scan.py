"""Static checks of a candidate's Python source, before anything of it runs.

These name what a legitimate ModelNew never needs: PyTorch's compiler and internals,
introspection, processes and threads, the harness, the reference. Each finding is a flag.
"""

from __future__ import annotations

import ast
from typing import Any

FORBIDDEN_MODULES = {
    "numpy": "foreign_compute",
    "scipy": "foreign_compute",
    "numba": "foreign_compute",
    "cupy": "foreign_compute",
    "jax": "foreign_compute",
    "triton": "foreign_compute",
    "gc": "introspection",
    "inspect": "introspection",
    "ctypes": "native_escape",
    "subprocess": "process_escape",
    "multiprocessing": "process_escape",
    "os": None,
    "threading": "background_thread",
    "concurrent": "background_thread",
    "asyncio": "background_thread",
    "socket": "network",
    "urllib": "network",
    "http": "network",
    "requests": "network",
    "signal": "process_escape",
    "kforge_harness": "harness_access",
    "builtins": "introspection",
    "importlib": "introspection",
    "model": "imports_reference",
    "reference": "imports_reference",
    "kforge_task": "imports_reference",
}
# Attribute chains (prefixes) and the flag each raises.
FORBIDDEN_ATTRS = [
    ("torch.compile", "torch_compile"),
    ("torch._dynamo", "torch_compile"),
    ("torch._inductor", "torch_compile"),
    ("torch.jit", "torch_compile"),
    ("torch._C", "torch_internals"),
    ("torch.utils._python_dispatch", "torch_internals"),
    ("torch.library", "torch_internals"),
    ("torch.ops", "torch_compute"),
    ("torch.cuda.Stream", "side_stream"),
    ("torch.cuda.stream", "side_stream"),
    ("torch.cuda.graph", "side_stream"),
    ("torch.cuda.CUDAGraph", "side_stream"),
    ("sys._getframe", "introspection"),
    ("sys.modules", "introspection"),
    ("sys.settrace", "introspection"),
    ("sys.setprofile", "introspection"),
    ("os.system", "process_escape"),
    ("os.fork", "process_escape"),
    ("os.kill", "process_escape"),
    ("os.environ", "environment_access"),
    ("torch.Tensor.__torch_function__", "tensor_subclass"),
    ("torch.from_numpy", "foreign_compute"),
    ("sys.argv", "introspection"),
    ("sys._current_frames", "introspection"),
    ("importlib.import_module", "introspection"),
]
# Method names that leave PyTorch for Python or NumPy compute.
FORBIDDEN_METHODS = {"numpy": "foreign_compute", "tolist": "foreign_compute", "__array__": "foreign_compute"}
# Substrings of string constants that name internals a ModelNew has no business with; they catch
# attribute access spelled as strings (getattr(sys, "_getframe")).
SUSPICIOUS_STRINGS = [
    "_getframe",
    "_current_frames",
    "_DisableTorchDispatch",
    "_disable_current_modes",
    "_python_dispatch",
    "_unset_dispatch",
    "_pop_mode",
    "_dynamo",
    "_inductor",
    "kforge_harness",
    "kforge_task",
    "perf_counter",
    "elapsed_time",
    "allclose",
    "/proc/self/fd",
    "/mem",
    "get_objects",
    "ComputeGuard",
    "NativeGuard",
    "DispatchKey",
    "kforge-guard",
    "redispatch",
    "at::native",
    "at::_ops",
    "settrace",
    "setprofile",
]
# Modules whose attributes must not be reached through getattr/setattr with computed names.
INTERNAL_OWNERS = {
    "torch",
    "sys",
    "os",
    "time",
    "json",
    "builtins",
    "gc",
    "kr",
    "kforge_runtime",
    "statistics",
}
ALLOWED_EXTENSION_FORMATS = ("kernelbench", "cuda-agent")


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def scan_source(source: str, fmt: str) -> tuple[list[str], list[str]]:
    """Returns (flags, details). A source that does not parse returns no flags."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [], []
    flags: list[str] = []
    details: list[str] = []
    aliases: dict[str, str] = {}

    def add(flag: str, detail: str) -> None:
        if flag not in flags:
            flags.append(flag)
        details.append(detail)

    docstrings = _docstring_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for alias in node.names:
                full = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    full if alias.asname else alias.name.split(".")[0]
                )
                if isinstance(node, ast.ImportFrom):
                    aliases[alias.asname or alias.name] = full
                    names.append(full)
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                names.append("model")
            for name in names:
                top = name.split(".")[0]
                flag = FORBIDDEN_MODULES.get(top)
                if flag:
                    add(flag, f"imports {name}")
                if name.startswith("torch.utils.cpp_extension") and fmt not in ALLOWED_EXTENSION_FORMATS:
                    add("torch_extension", f"imports {name}")
                for prefix, f2 in FORBIDDEN_ATTRS:
                    if name == prefix or name.startswith(prefix + "."):
                        add(f2, f"imports {name}")
        elif isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_METHODS:
                add(FORBIDDEN_METHODS[node.attr], f"calls .{node.attr}()")
            dotted = _dotted(node)
            if dotted is None:
                continue
            head, _, rest = dotted.partition(".")
            full = aliases.get(head, head) + ("." + rest if rest else "")
            for prefix, flag in FORBIDDEN_ATTRS:
                if full == prefix or full.startswith(prefix + "."):
                    add(flag, f"uses {full}")
            if full.startswith("torch.utils.cpp_extension") and fmt not in ALLOWED_EXTENSION_FORMATS:
                add("torch_extension", f"uses {full}")
        elif isinstance(node, ast.Name) and node.id in (
            "__import__",
            "eval",
            "exec",
            "globals",
            "vars",
            "compile",
        ):
            add("introspection", f"uses {node.id}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            for needle in SUSPICIOUS_STRINGS:
                if needle in node.value:
                    add("introspection", f"names {needle!r} in a string")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "setattr", "delattr") and node.args:
                owner = _dotted(node.args[0]) or ""
                if owner.split(".")[0] in INTERNAL_OWNERS:
                    add("introspection", f"{node.func.id} on {owner}")
        elif isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for base in node.bases:
                dotted = _dotted(base) or ""
                if dotted.split(".")[-1] != "Module" and not _local_class(tree, dotted):
                    add("inherits_reference", f"ModelNew derives from {dotted or '?'}")
    return flags, details


def _docstring_nodes(tree: ast.Module) -> set[int]:
    """ids of the string constants that are docstrings (prose, not code)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _local_class(tree: ast.Module, name: str) -> bool:
    """True when ``name`` is a class defined in the file deriving from nn.Module."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return all((_dotted(b) or "").split(".")[-1] == "Module" for b in node.bases)
    return False


def scan_candidate_sources(files: list[str], fmt: str) -> dict[str, Any]:
    flags: list[str] = []
    details: list[str] = []
    for f in files:
        if f.endswith(".py"):
            fl, de = scan_source(open(f, encoding="utf-8", errors="replace").read(), fmt)
            flags += [x for x in fl if x not in flags]
            details += de
    return {"flags": flags, "details": details}
