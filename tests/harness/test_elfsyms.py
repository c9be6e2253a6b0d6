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


def _library_calling(tmp_path: Path, decls: str, body: str) -> str:
    """A shared library whose one function calls the declared functions (left undefined)."""
    src = tmp_path / "ext.cpp"
    src.write_text(f'{decls}\nextern "C" int entry(int x) {{ return {body}; }}\n')
    lib = tmp_path / "ext.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return str(lib)


def test_every_family_of_operator_entry_points_is_named(tmp_path: Path):
    """An operator's kernel can be called without the dispatcher through at::native, at::cpu,
    at::cuda, at::meta (an operator's name there; not the streams, handles, graphs and CPU
    queries extensions use, nor an operator the guard allows) and the composite namespaces:
    each is named; the honest names are not."""
    cases = {
        "an operator's backend": ("namespace at { namespace cpu { int relu(int); } }", "at::cpu::relu(x)"),
        "an operator's backend ": ("namespace at { namespace meta { int add(int); } }", "at::meta::add(x)"),
        "at::composite": (
            "namespace at { namespace compositeexplicitautograd { int mul(int); } }",
            "at::compositeexplicitautograd::mul(x)",
        ),
        " an operator's backend": ("namespace at { namespace cuda { int relu(int); } }", "at::cuda::relu(x)"),
    }
    from kforge_harness.guard import ALLOWED_OPS

    ops = elfsyms.operator_names() - ALLOWED_OPS
    assert {"relu", "add", "mm"} <= ops and "empty" not in ops
    for i, (what, (decls, body)) in enumerate(cases.items()):
        d = tmp_path / str(i)
        d.mkdir()
        found = elfsyms.forbidden_imports(_library_calling(d, decls, body), ops)
        assert any(f.startswith(what.strip()) for f in found), (what, found)
    honest = _library_calling(
        tmp_path,
        "namespace at { namespace cuda { int getCurrentCUDAStream(int); int empty(int);"
        " struct CUDAGraph { int replay(); }; }"
        " namespace cpu { bool is_avx512_supported(); } }",
        "at::cuda::getCurrentCUDAStream(x) + at::cuda::empty(x) + ((at::cuda::CUDAGraph*)nullptr)->replay()"
        " + at::cpu::is_avx512_supported()",
    )
    assert elfsyms.forbidden_imports(honest, ops) == []
