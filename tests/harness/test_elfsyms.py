"""What a C++ extension imports (kforge_harness.elfsyms): read from the ELF file itself, and the
imports that reach past the dispatcher's entry, where neither guard nor the profiler looks.
The full path (a KernelBench candidate calling redispatch, rejected) is in test_hacks."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kforge_harness import build, elfsyms, nativeguard


def test_the_imports_are_read_as_readelf_reads_them():
    lib = nativeguard.library_path()
    assert lib is not None, "make build builds build/libkforge-guard.so"
    ours = set(elfsyms.undefined_symbols(lib))
    out = subprocess.run(
        ["readelf", "-W", "--dyn-syms", lib], capture_output=True, text=True, check=True
    ).stdout
    theirs = {
        cols[7].split("@")[0]
        for cols in (line.split() for line in out.splitlines())
        if len(cols) >= 8 and cols[6] == "UND" and cols[7]
    }
    assert ours == theirs and len(ours) > 10


def test_a_library_that_reaches_the_dispatcher_is_named(tmp_path: Path):
    """The guard's own library imports c10::Dispatcher (it registers a fallback): as an
    extension's library it would be refused, and the judge's look at a CUDA Agent build says so."""
    lib = nativeguard.library_path()
    assert lib is not None
    found = elfsyms.forbidden_imports(lib)
    assert any(f.startswith("c10::Dispatcher") for f in found), found
    ext = tmp_path / "ext"
    ext.mkdir()
    assert build.extension_flags(str(ext)) == []
    shutil.copy(lib, ext / "cuda_extension.so")
    assert build.extension_flags(str(ext)) == ["torch_internals"]


def test_what_is_not_an_elf_library_is_said_so(tmp_path: Path):
    bad = tmp_path / "x.so"
    bad.write_bytes(b"#!/bin/sh\n")
    assert elfsyms.forbidden_imports(str(bad)) == ["unreadable library (ValueError)"]
    assert all(p.startswith("/") for p in elfsyms.loaded_libraries())
    assert any("libc" in Path(p).name for p in elfsyms.loaded_libraries())
