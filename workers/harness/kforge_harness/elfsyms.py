"""The symbols a shared library imports (its undefined dynamic symbols), read from the ELF file
in pure Python (the runner has no readelf inside the jail), and the ones an extension may not
import.

A candidate's C++ extension (KernelBench's load_inline, CUDA Agent's sources) links PyTorch, so
it can reach past the dispatcher: ``at::_ops::X::redispatch`` with a key set below the guards,
``at::native::*`` kernels called directly, the dispatcher's handles. Neither
compute guard nor the profiler sees such calls (they never enter the dispatcher from the top), but
the linker must import each of them by name, however the source spells it."""

from __future__ import annotations

import re
import struct

# Mangled (Itanium) or plain names of imports that bypass the dispatcher's entry.
FORBIDDEN_IMPORTS = [
    (re.compile(r"^_ZN2at6native"), "at::native:: (a kernel called without the dispatcher)"),
    (re.compile(r"^_ZN2at4_ops\w*10redispatch"), "at::_ops::*::redispatch (past the guards' key)"),
    (re.compile(r"^_ZN\w*3c1010Dispatcher"), "c10::Dispatcher"),
    (re.compile(r"^_ZN2at4cuda4blas"), "at::cuda::blas:: (PyTorch's GEMMs)"),
    # the per-backend entry points of every operator (ATen/ops/*_dispatch.h): a kernel of
    # PyTorch's, called without the dispatcher (at::cpu, at::cuda and at::meta: ENTRY_POINTS)
    (
        re.compile(r"^_ZN2at\d+composite(explicit|implicit)autograd"),
        "at::composite*autograd:: (an operator's kernel without the dispatcher)",
    ),
    (
        re.compile(
            r"^_ZN2at\d+(sparsecpu|sparsecuda|quantizedcpu|quantizedcuda|mkldnn|nestedtensorcpu|nestedtensorcuda)"
        ),
        "an operator's backend kernel without the dispatcher",
    ),
]
# Imports that start a process or replace the program: a native candidate may not (the jail
# contains them, and a kernel has no use for them). Not pthread_create or syscall: nvcc's static
# CUDA runtime imports both into every library.
PROCESS_IMPORTS = re.compile(
    r"^(v?fork|__libc_fork|_Fork|clone3?|execv\w*|execl\w*|execve\w*|fexecve|posix_spawnp?|system|popen)$"
)
# (Not among them: the guards that exclude dispatch keys, which PyTorch's own inline factories
# use (torch::empty_like); calls made under one still enter the dispatcher, where the profiler of
# the checked calls records them. Nor the dynamic loader: nvcc links its static CUDA runtime,
# which imports dlopen, into every library; the sources' scan refuses a candidate's own dlopen.)


def undefined_symbols(path: str) -> list[str]:
    """Names of the undefined dynamic symbols of a 64-bit little-endian ELF file. Raises
    ValueError for anything else."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out = []
    for sh in sections:
        if sh[1] != 11:  # SHT_DYNSYM
            continue
        offset, size, link, entsize = sh[4], sh[5], sh[6], sh[9] or 24
        strtab = sections[link][4]
        for i in range(1, size // entsize):
            name_off, _info, _other, shndx = struct.unpack_from("<IBBH", data, offset + i * entsize)
            if shndx != 0 or name_off == 0:  # SHN_UNDEF only
                continue
            end = data.index(b"\0", strtab + name_off)
            out.append(data[strtab + name_off : end].decode("ascii", "replace"))
    return out


# at::cpu::NAME, at::cuda::NAME and at::meta::NAME for NAME an operator's: its kernel for that
# backend without the dispatcher (ATen/ops/*_cpu_dispatch.h and the like). The namespaces also
# hold what extensions use honestly (streams, handles, CUDAGraph, CPU feature queries), so the
# names are matched against the operators PyTorch registers, less the ones the compute guard
# allows anyway (allocation, views, metadata).
ENTRY_POINTS = re.compile(r"^_ZN2at(3cpu|4cuda|4meta)(\d+)")


def operator_names() -> set[str]:
    """The base names of the ATen operators registered in this process (PyTorch imported)."""
    import torch

    return {
        n.split("::", 1)[1].split(".", 1)[0]
        for n in torch._C._dispatch_get_all_op_names()
        if n.startswith("aten::")
    }


def _operator_entry(name: str, ops: set[str]) -> bool:
    m = ENTRY_POINTS.match(name)
    if not m:
        return False
    start = m.end()
    return name[start : start + int(m.group(2))] in ops


def forbidden_imports(path: str, ops: set[str] | None = None) -> list[str]:
    """What the library imports that an extension may not, one description each (empty: none).
    With ``ops`` (operator names: where PyTorch is imported), the at::cpu, at::cuda and at::meta
    entry points of those operators too. A file that cannot be read as ELF is reported as such."""
    try:
        names = undefined_symbols(path)
    except (OSError, ValueError, struct.error, IndexError) as e:
        return [f"unreadable library ({type(e).__name__})"]
    found = []
    for pattern, what in FORBIDDEN_IMPORTS:
        hits = [n for n in names if pattern.search(n)]
        if hits:
            found.append(f"{what}: {hits[0][:120]}")
    hits = [n for n in names if _operator_entry(n, ops)] if ops else []
    if hits:
        found.append(f"an operator's backend kernel without the dispatcher: {hits[0][:120]}")
    return found


def loaded_libraries() -> set[str]:
    """The shared objects mapped into this process (from /proc/self/maps; empty where there is none)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return set()
    out = set()
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and ".so" in parts[5] and parts[5].startswith("/"):
            out.add(parts[5].removesuffix(" (deleted)"))
    return out
