"""The seccomp filter the Bash sandbox loads (bubblewrap's ``--seccomp FD``), built with libseccomp.

A build or test command never needs to mount file systems, trace other processes, touch the
kernel keyring, load BPF programs or kernel modules, replace the running kernel, set the clock or
the host name, or make new namespaces; those calls fail with ``EPERM`` (``clone3`` with
``ENOSYS``, so the C library falls back to ``clone``, whose namespace flags the filter can see).
Every other call is allowed: the filter narrows what a command could ask of the kernel, the
mount layout and the user namespace do the rest.

The program is compiled by libseccomp (Debian package ``libseccomp2``, which systemd and most
of the base system already depend on) through ``ctypes``: its syscall tables and architecture
checks (a foreign or x32 ABI call is refused) are the maintained ones, not a copy kept here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import tempfile

SECCOMP_PACKAGE = "libseccomp2"
DENIED_SYSCALLS: tuple[str, ...] = (
    # file systems and the root
    "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "quotactl", "quotactl_fd", "swapon", "swapoff",
    "open_by_handle_at", "name_to_handle_at", "nfsservctl", "lookup_dcookie", "uselib",
    # other processes and the kernel's keyring
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "keyctl", "add_key", "request_key",
    # kernel programs, modules and the kernel itself
    "bpf", "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "create_module", "reboot", "_sysctl", "acct", "syslog",
    "iopl", "ioperm", "vm86", "vm86old", "io_uring_setup", "io_uring_enter", "io_uring_register",
    # host-global state
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime", "sethostname",
    "setdomainname", "vhangup",
    # new namespaces
    "unshare", "setns",
)  # fmt: skip
"""Calls that fail with EPERM inside the sandbox (names the running architecture lacks are skipped)."""
CLONE_NAMESPACE_FLAGS: tuple[int, ...] = (
    0x00000080, 0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000,
)  # fmt: skip
"""CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: ``clone`` with any fails."""

_ACT_ALLOW = 0x7FFF0000
_CMP_MASKED_EQ = 7


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    """libseccomp's ``struct scmp_arg_cmp``."""

    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


class SeccompUnavailable(RuntimeError):
    """libseccomp is missing or refused to build the filter."""


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        raise SeccompUnavailable(
            f"libseccomp not found (Debian package '{SECCOMP_PACKAGE}'): {exc}"
        ) from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp),
    ]  # fmt: skip
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_export_bpf.restype = ctypes.c_int
    return lib


@functools.lru_cache(maxsize=1)
def filter_program() -> bytes:
    """The compiled BPF program (``struct sock_filter`` array) for this machine's architecture.

    Raises ``SeccompUnavailable`` when libseccomp cannot be loaded or refuses a rule.
    """
    lib = _library()
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        no_args = ctypes.POINTER(_ArgCmp)()  # NULL: no argument comparisons
        for name in DENIED_SYSCALLS:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue  # not a call of this architecture
            _check(lib.seccomp_rule_add_array(ctx, _act_errno(errno.EPERM), number, 0, no_args), name)
        clone3 = lib.seccomp_syscall_resolve_name(b"clone3")
        if clone3 >= 0:
            # clone3 passes its flags in memory, out of a filter's sight: make libc use clone.
            _check(lib.seccomp_rule_add_array(ctx, _act_errno(errno.ENOSYS), clone3, 0, no_args), "clone3")
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        for flag in CLONE_NAMESPACE_FLAGS:
            cmp = (_ArgCmp * 1)(_ArgCmp(0, _CMP_MASKED_EQ, flag, flag))
            _check(lib.seccomp_rule_add_array(ctx, _act_errno(errno.EPERM), clone, 1, cmp), "clone")
        with tempfile.TemporaryFile() as out:
            _check(lib.seccomp_export_bpf(ctx, out.fileno()), "export")
            out.seek(0)
            program = out.read()
    finally:
        lib.seccomp_release(ctx)
    if not program or len(program) % 8:
        raise SeccompUnavailable("libseccomp exported an empty or malformed program")
    return program


def _check(code: int, what: str) -> None:
    if code < 0:
        raise SeccompUnavailable(f"libseccomp refused the rule for {what}: {os.strerror(-code)}")


def program_fd() -> int:
    """A new readable file descriptor positioned at the start of the program (the caller closes it)."""
    program = filter_program()
    fd = os.memfd_create("subagent-lab-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
