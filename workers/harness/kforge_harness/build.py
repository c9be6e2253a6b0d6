"""Building candidates: native libraries with nvcc or g++, CUDA Agent extensions, with a cache.

Native sources are compiled straight into one shared library without PyTorch headers: several
sources each to an object file at once (one compiler call each, KFORGE_BUILD_JOBS at a time,
the same flags), then linked, so a plan of 61 kernels (a ResNet-18 written out by the expert)
builds in a few of its files' time instead of all of theirs; one source in one call. Builds
are cached under ``<cache>/builds/<key>/`` where the key hashes the sources, the flags and the
compiler's version; a cached build is reused as is.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from kforge_harness import elfsyms, jailwrap
from kforge_harness.candidate import Candidate

DIAG_LIMIT = 4000
ALLOWED_NEEDED = re.compile(
    r"^(libcudart|libcublas|libcublasLt|libcudnn\w*|libcurand|libstdc\+\+|libm|libgcc_s|libc|"
    r"libgomp|ld-linux-x86-64|libdl|libpthread|librt)\.so"
)
FORBIDDEN_NATIVE = [
    (re.compile(r"#\s*include\s*[<\"](torch/|ATen/|c10/|Python\.h|pybind11)"), "torch_in_native"),
    (re.compile(r"\bdl(open|sym|mopen)\s*\("), "dynamic_loading"),
    (
        re.compile(
            r"\b(v?fork|clone3?|execv\w*|execl\w*|fexecve|posix_spawnp?|system|popen|pthread_create)\s*\("
        ),
        "native_process",
    ),
    (re.compile(r"std::(thread|async|jthread)\b"), "native_process"),
]


class JailError(Exception):
    """kforge-jail could not be set up: an infrastructure failure, not the candidate's."""


class BuildError(Exception):
    """The compiler rejected the candidate: carries trimmed diagnostics."""

    def __init__(self, message: str, diagnostics: str = "") -> None:
        super().__init__(message)
        self.diagnostics = diagnostics


@dataclass
class BuildResult:
    lib: str | None = None
    ext_dir: str | None = None
    seconds: float = 0.0
    cached: bool = False
    command: list[str] = field(default_factory=list)
    diagnostics: str = ""
    flags: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 3),
            "cached": self.cached,
            "command": " ".join(self.command),
            "diagnostics": self.diagnostics,
        }


def cache_dir() -> str:
    base = os.environ.get("KFORGE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kforge"
    )
    os.makedirs(base, exist_ok=True)
    return base


def trim(text: str, limit: int = DIAG_LIMIT) -> str:
    """Keeps the head and tail of long compiler output, where the useful lines are."""
    if len(text) <= limit:
        return text
    head = text[: limit * 3 // 4]
    tail = text[-limit // 4 :]
    return f"{head}\n... [{len(text) - len(head) - len(tail)} characters cut] ...\n{tail}"


def _tool_version(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def cuda_arch() -> str:
    """The compute capability to build for: KFORGE_CUDA_ARCH, the first visible GPU's (asked of
    the driver directly: the judge builds before it imports PyTorch), or 90."""
    env = os.environ.get("KFORGE_CUDA_ARCH")
    if env:
        return env
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        if cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0:
            # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR
            if (
                cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) == 0
                and cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) == 0
            ):
                return f"{major.value}{minor.value}"
    except (OSError, AttributeError):
        pass
    return "90"


def native_command(cand: Candidate, backend: str, out: str) -> list[str]:
    sources = [f for f in cand.kernel_files if f.endswith((".cu", ".cpp"))]
    text = "".join(open(f, encoding="utf-8", errors="replace").read() for f in cand.kernel_files)
    if backend == "cuda":
        arch = cuda_arch()
        cmd = [
            os.environ.get("KFORGE_NVCC", "nvcc"),
            "-O3",
            "-std=c++17",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            f"-gencode=arch=compute_{arch},code=sm_{arch}",
            "-o",
            out,
            *sources,
        ]
        if "cublasLt.h" in text:
            cmd.append("-lcublasLt")
        if "cublas_v2.h" in text or "cublas.h" in text:
            cmd.append("-lcublas")
        if "cudnn.h" in text:
            cmd.append("-lcudnn")
        return cmd
    cmd = [
        os.environ.get("KFORGE_CXX", "g++"),
        "-O3",
        "-march=native",
        "-std=c++17",
        "-shared",
        "-fPIC",
        "-Wall",
        "-o",
        out,
        *sources,
    ]
    if "omp.h" in text or "#pragma omp" in text:
        cmd.insert(1, "-fopenmp")
    return cmd


def build_jobs() -> int:
    """How many compiler calls a build runs at once: KFORGE_BUILD_JOBS, else the CPUs up to 8."""
    v = os.environ.get("KFORGE_BUILD_JOBS", "")
    if v.isdigit() and int(v) > 0:
        return int(v)
    return max(1, min(8, os.cpu_count() or 1))


def split_command(
    cmd: list[str], sources: list[str], out: str, objdir: str
) -> tuple[list[list[str]], list[str]]:
    """native_command's one call as a compile call per source (its object in objdir) and the
    link of the objects: the same compiler flags in each, the libraries in the link only."""
    i = cmd.index("-o")
    flags, libs = cmd[1:i], [a for a in cmd[i + 2 :] if a.startswith("-l")]
    compile_flags = [f for f in flags if f != "-shared"]
    objs = [os.path.join(objdir, f"{n}_{os.path.basename(src)}.o") for n, src in enumerate(sources)]
    compiles = [[cmd[0], *compile_flags, "-c", src, "-o", obj] for src, obj in zip(sources, objs)]
    return compiles, [cmd[0], *flags, "-o", out, *objs, *libs]


def _run_all(
    cmds: list[list[str]],
    cwd: str,
    deadline: float,
    prefix_for: Callable[[float], list[str] | None],
    jobs: int,
) -> tuple[int, str]:
    """Runs cmds, jobs at a time, each before deadline (time.monotonic): the first failing
    status (0 when none failed) and every call's output in order."""

    def one(c: list[str]) -> tuple[int, str]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BuildError("build timed out")
        return _run(c, cwd, left, prefix_for(left))

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, cmds))
    rc = next((r for r, _ in results if r != 0), 0)
    return rc, "".join(d for _, d in results)


def _key(cand: Candidate, backend: str, cmd_template: list[str], version: str) -> str:
    h = hashlib.sha256()
    h.update(f"{cand.format}\0{backend}\0{version}\0".encode())
    h.update(" ".join(os.path.basename(c) for c in cmd_template).encode())
    for f in sorted(cand.kernel_files):
        h.update(os.path.basename(f).encode() + b"\0")
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:32]


def scan_native(cand: Candidate) -> list[str]:
    """Flags for native sources that reach for PyTorch, the loader or new processes."""
    flags: list[str] = []
    for f in cand.kernel_files:
        text = open(f, encoding="utf-8", errors="replace").read()
        for pattern, flag in FORBIDDEN_NATIVE:
            if pattern.search(text) and flag not in flags:
                flags.append(flag)
    return flags


def binary_flags(lib: str) -> list[str]:
    """Flags for what a built library links and imports, however its sources spelled it: a
    library outside the allow-list (``forbidden_library``), a call that starts a process
    (``native_process``: fork, vfork, clone, exec*, posix_spawn, system, popen). Checked on every
    evaluation, a cached build's too."""
    flags = []
    if any(not ALLOWED_NEEDED.match(name) for name in needed_libraries(lib)):
        flags.append("forbidden_library")
    try:
        imports = elfsyms.undefined_symbols(lib)
    except (OSError, ValueError, IndexError):
        imports = []
    if any(elfsyms.PROCESS_IMPORTS.match(n) for n in imports):
        flags.append("native_process")
    return flags


def needed_libraries(path: str) -> list[str]:
    """The DT_NEEDED entries of a shared library, read with readelf (empty if unavailable)."""
    try:
        out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _run(cmd: list[str], cwd: str, timeout: float, prefix: list[str] | None = None) -> tuple[int, str]:
    cmd = [*(prefix or []), *cmd]
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, errors="replace")
    except FileNotFoundError as e:
        raise BuildError(f"compiler not found: {e}") from e
    except subprocess.TimeoutExpired as e:
        raise BuildError(f"build timed out after {timeout:.0f} s", trim(str(e.stdout or ""))) from e
    return p.returncode, (p.stdout or "") + (p.stderr or "")


def build_native(
    cand: Candidate,
    backend: str,
    timeout: float = 180.0,
    jail: str | None = None,
    disk_mib: int = jailwrap.DISK_MIB,
) -> BuildResult:
    """Builds (or fetches from the cache) the native library. Raises BuildError."""
    compiler = "nvcc" if backend == "cuda" else "g++"
    version = _tool_version([compiler, "--version"]) + (cuda_arch() if backend == "cuda" else "")
    template = native_command(cand, backend, "lib.so")
    key = _key(cand, backend, template, version)
    final_dir = os.path.join(cache_dir(), "builds", key)
    lib = os.path.join(final_dir, "libcandidate.so")
    flags = scan_native(cand)
    if os.path.isfile(lib):
        return BuildResult(lib=lib, cached=True, command=template, flags=flags + binary_flags(lib))
    os.makedirs(os.path.dirname(final_dir), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="build-", dir=os.path.dirname(final_dir))
    try:
        out = os.path.join(tmp, "libcandidate.so")
        cmd = native_command(cand, backend, out)
        t0 = time.monotonic()

        def prefix_for(left: float) -> list[str] | None:
            return jailwrap.build_prefix(jail, tmp, cand.path, left, disk_mib) if jail else None

        cwd = tmp if jail else cand.path
        sources = [f for f in cand.kernel_files if f.endswith((".cu", ".cpp"))]
        jobs = min(build_jobs(), len(sources))
        if jobs > 1:  # an object a source, jobs at once, then the link
            compiles, cmd = split_command(cmd, sources, out, tmp)
            rc, diag = _run_all(compiles, cwd, t0 + timeout, prefix_for, jobs)
            if rc == 0:
                rc, more = _run_all([cmd], cwd, t0 + timeout, prefix_for, 1)
                diag += more
        else:
            rc, diag = _run(cmd, cwd, timeout, prefix_for(timeout))
        if jail and rc == jailwrap.JAIL_SETUP_FAILED and "kforge-jail:" in diag:
            raise JailError(next(ln for ln in reversed(diag.splitlines()) if "kforge-jail:" in ln))
        seconds = time.monotonic() - t0
        over = jailwrap.disk_limit(diag) if jail else None
        if rc != 0 or over:
            raise BuildError(over or f"{compiler} exited with status {rc}", trim(diag))
        flags += binary_flags(out)
        try:
            os.rename(tmp, final_dir)
        except OSError:
            pass  # another build of the same key won the race; use it
        return BuildResult(lib=lib, seconds=seconds, command=cmd, diagnostics=trim(diag), flags=flags)
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


EXT_NAME = "cuda_extension"


def build_cuda_agent(
    cand: Candidate,
    backend: str,
    timeout: float = 900.0,
    jail: str | None = None,
    disk_mib: int = jailwrap.DISK_MIB,
) -> BuildResult:
    """Builds a CUDA Agent workspace into a PyTorch extension module named ``cuda_extension``.

    The build runs in a child process, so the judge never imports the candidate's native code.
    """
    version = (
        _tool_version(["nvcc", "--version"]) if backend == "cuda" else _tool_version(["g++", "--version"])
    )
    key = _key(cand, backend, ["torch-ext", EXT_NAME], version)
    final_dir = os.path.join(cache_dir(), "ext", key)
    marker = os.path.join(final_dir, "ok")
    if os.path.isfile(marker):
        return BuildResult(
            ext_dir=final_dir,
            cached=True,
            command=["torch.utils.cpp_extension.load"],
            flags=extension_flags(final_dir),
        )
    os.makedirs(final_dir, exist_ok=True)
    sources = [f for f in cand.kernel_files if f.endswith((".cu", ".cpp"))]
    script = (
        "import sys, torch.utils.cpp_extension as e\n"
        f"e.load(name={EXT_NAME!r}, sources=sys.argv[2:], build_directory=sys.argv[1],"
        " extra_cflags=['-O3'], extra_cuda_cflags=['-O3'], verbose=False)\n"
    )
    t0 = time.monotonic()
    prefix = jailwrap.build_prefix(jail, final_dir, cand.path, timeout, disk_mib) if jail else None
    rc, diag = _run(
        [os.path.abspath(sys.executable), "-c", script, final_dir, *sources],
        final_dir if jail else cand.path,
        timeout,
        prefix,
    )
    if jail and rc == jailwrap.JAIL_SETUP_FAILED and "kforge-jail:" in diag:
        shutil.rmtree(final_dir, ignore_errors=True)
        raise JailError(diag.strip().splitlines()[-1])
    over = jailwrap.disk_limit(diag) if jail else None
    if rc != 0 or over:
        shutil.rmtree(final_dir, ignore_errors=True)  # nothing of a failed build stays
        raise BuildError(over or f"extension build exited with status {rc}", trim(diag))
    open(marker, "w").close()
    return BuildResult(
        ext_dir=final_dir,
        seconds=time.monotonic() - t0,
        command=["torch.utils.cpp_extension.load"],
        diagnostics=trim(diag),
        flags=extension_flags(final_dir),
    )


def extension_flags(ext_dir: str) -> list[str]:
    """``torch_internals`` when a library the extension build made imports what reaches past
    the dispatcher (elfsyms.FORBIDDEN_IMPORTS). The runner checks the libraries it loads as well
    (KernelBench's load_inline builds at import); this is the judge's own look, before any run."""
    for name in sorted(os.listdir(ext_dir)):
        if name.endswith(".so") and elfsyms.forbidden_imports(os.path.join(ext_dir, name)):
            return ["torch_internals"]
    return []
