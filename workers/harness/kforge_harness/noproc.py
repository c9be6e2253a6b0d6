"""No new process in the runner once the candidate's model is built.

A candidate's import may start processes (KernelBench's ``load_inline`` runs the compiler). Once
``ModelNew`` is built the runner has no use for one, and a process of the candidate's could
compute where no guard of the runner looks (PyTorch in a child, fed through shared memory). So the
runner, before it answers ``init``, checks that it has no child left (``proc.children``) and installs a
seccomp filter (``forbid``) under which fork, vfork, clone without CLONE_THREAD, clone3 and exec
fail: threads may still be made (PyTorch's and OpenMP's pools), processes not. A filter cannot be
removed, only stacked; the jail's own stays beneath it. x86-64 only (elsewhere ``forbid`` says so
and does nothing).
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

from kforge_harness.proc import PR_SET_NO_NEW_PRIVS, children, prctl

__all__ = ["children", "forbid"]

_SECCOMP_SET_MODE_FILTER = 1
_NR_SECCOMP = 317
_AUDIT_ARCH_X86_64 = 0xC000003E
_CLONE_THREAD = 0x00010000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
# BPF opcodes: ld w abs, jeq k, jge k, jset k, ret k
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_X32_BIT = 0x40000000
# x86-64 syscall numbers
_CLONE, _FORK, _VFORK, _EXECVE, _EXECVEAT, _CLONE3 = 56, 57, 58, 59, 322, 435


def _program() -> bytes:
    """The filter: seccomp_data is {int nr; u32 arch; u64 ip; u64 args[6]} (args[0] at 16)."""
    deny, nosys, allow = "deny", "nosys", "allow"
    ins: list[tuple[int, object, object, int]] = [
        (_LD, 0, 0, 4),  # arch
        (_JEQ, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET, 0, 0, _RET_ALLOW),  # another ABI: not ours to judge
        (_LD, 0, 0, 0),  # nr
        (_JGE, deny, 0, _X32_BIT),  # the x32 ABI's numbers: none of them for a runner
        (_JEQ, nosys, 0, _CLONE3),  # glibc falls back to clone, which is checked below
        (_JEQ, 0, "notclone", _CLONE),
        (_LD, 0, 0, 16),  # args[0], its low half: the flags
        (_JSET, allow, deny, _CLONE_THREAD),  # a thread: allowed
        ("notclone", 0, 0, 0),
        (_JEQ, deny, 0, _FORK),
        (_JEQ, deny, 0, _VFORK),
        (_JEQ, deny, 0, _EXECVE),
        (_JEQ, deny, 0, _EXECVEAT),
        (allow, 0, 0, 0),
        (_RET, 0, 0, _RET_ALLOW),
        (deny, 0, 0, 0),
        (_RET, 0, 0, _RET_ERRNO | _EPERM),
        (nosys, 0, 0, 0),
        (_RET, 0, 0, _RET_ERRNO | _ENOSYS),
    ]
    labels, code = {}, []
    for op, jt, jf, k in ins:
        if isinstance(op, str):
            labels[op] = len(code)
        else:
            code.append((op, jt, jf, k))

    def off(target: object, at: int) -> int:
        return labels[target] - at - 1 if isinstance(target, str) else int(target)  # type: ignore[call-overload]

    return b"".join(
        struct.pack("<HBBI", op, off(jt, i), off(jf, i), k) for i, (op, jt, jf, k) in enumerate(code)
    )


def forbid() -> str | None:
    """Installs the filter on every thread of this process (TSYNC); None, or why it could not."""
    if platform.machine() != "x86_64":
        return f"no process filter on {platform.machine()}"
    prog = _program()
    buf = ctypes.create_string_buffer(prog)

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # required without CAP_SYS_ADMIN
    libc = ctypes.CDLL(None, use_errno=True)
    tsync = 1  # SECCOMP_FILTER_FLAG_TSYNC
    if libc.syscall(_NR_SECCOMP, _SECCOMP_SET_MODE_FILTER, tsync, ctypes.byref(fprog)) != 0:
        return f"seccomp: {os.strerror(ctypes.get_errno())}"
    return None
