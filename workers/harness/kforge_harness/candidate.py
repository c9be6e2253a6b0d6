"""Candidate formats: telling them apart and listing their files."""

from __future__ import annotations

import os
from dataclasses import dataclass

FORMATS = ("native", "kernelbench", "cuda-agent")
# What Python imports besides sources: extension modules, bytecode, path hooks, archives.
BINARY_MODULES = (".so", ".pyd", ".pyc", ".pyo", ".pth", ".zip", ".egg", ".whl")


class CandidateError(Exception):
    """The candidate's layout is unusable (missing files, unknown format)."""


@dataclass
class Candidate:
    path: str
    format: str
    model_file: str
    kernel_files: list[str]

    def source_files(self) -> list[str]:
        return [self.model_file, *self.kernel_files]

    def python_files(self) -> tuple[list[str], list[str]]:
        """(every Python source the runner could import from the candidate, every file it could
        import that is not a source: a compiled module, bytecode, a path hook or an archive).
        ``model_new.py`` may import a file of its own beside it, so the static scan reads them
        all; a prebuilt binary module would run code no scan or build of ours has seen."""
        if not os.path.isdir(self.path):
            return [self.model_file], []
        sources, binaries = [], []
        for root, dirs, files in os.walk(self.path):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                if name.endswith(".py"):
                    sources.append(full)
                elif name.endswith(BINARY_MODULES) or ".so." in name:
                    binaries.append(full)
                if len(sources) + len(binaries) >= 400:
                    return sources, binaries
        return sources, binaries


def detect(path: str, backend: str) -> Candidate:
    """A file is a KernelBench candidate; a folder is native or CUDA Agent (``*_binding.cpp``)."""
    if os.path.isfile(path):
        return Candidate(os.path.abspath(path), "kernelbench", os.path.abspath(path), [])
    if not os.path.isdir(path):
        raise CandidateError(f"no such candidate: {path}")
    root = os.path.abspath(path)
    model = os.path.join(root, "model_new.py")
    if not os.path.isfile(model):
        raise CandidateError("the candidate folder has no model_new.py")
    kdir = os.path.join(root, "kernels")
    names = sorted(os.listdir(kdir)) if os.path.isdir(kdir) else []
    files = [os.path.join(kdir, n) for n in names if os.path.isfile(os.path.join(kdir, n))]
    if any(n.endswith("_binding.cpp") for n in names):
        srcs = [f for f in files if f.endswith((".cu", ".cpp", ".cuh", ".h"))]
        return Candidate(root, "cuda-agent", model, srcs)
    ext = ".cu" if backend == "cuda" else ".cpp"
    srcs = [f for f in files if f.endswith((ext, ".h", ".cuh", ".hpp"))]
    if not any(f.endswith(ext) for f in srcs):
        raise CandidateError(f"the candidate folder has no kernels/*{ext} for backend {backend}")
    return Candidate(root, "native", model, srcs)
