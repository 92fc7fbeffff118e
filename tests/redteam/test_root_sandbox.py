"""Issue 24: the Bash sandbox holds when the harness runs as root (as set-up and CI do).

Run by root, bubblewrap's namespaces alone left the command the machine's real root with a
writable ``/proc/sys``: a host-global setting could be changed from inside (a crash-handler
pattern makes the kernel run a program as root outside any sandbox). Each check here shows a
door closed WITHOUT ever going through it: knobs are opened for writing (which changes nothing)
and never written; denied calls are made with arguments that would do nothing harmful even if
they succeeded (no-op mounts of a tmpfs inside the sandbox, a keyring lookup, PTRACE_TRACEME).

Like ``test_bash_sandbox.py`` these fail, not skip, where bubblewrap cannot run.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from subagent_lab.workspace.bwrap import BashSandbox, SandboxLimits, run_bwrap
from subagent_lab.workspace.seccomp import DENIED_SYSCALLS, filter_program

HOST_KNOBS = (
    "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches",
    "/proc/sys/kernel/hostname", "/proc/sys/fs/suid_dumpable", "/proc/sysrq-trigger",
    "/proc/sys/net/ipv4/ip_forward", "/sys/kernel/uevent_helper", "/sys/power/state",
)  # fmt: skip
"""Host-global settings; writing any of them from inside would change the machine."""

PROBE = r"""
import ctypes, errno, json, os, resource, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {"uid": os.getuid(), "gid": os.getgid(), "knobs": {}, "calls": {}, "limits": {}}
for knob in KNOBS:
    try:
        fd = os.open(knob, os.O_WRONLY)  # opening for writing changes nothing; never written
    except OSError as exc:
        out["knobs"][knob] = errno.errorcode.get(exc.errno, str(exc.errno))
    else:
        os.close(fd)
        out["knobs"][knob] = "WRITABLE"
with open("/proc/self/status") as fh:
    out["cap_eff"] = [l.split()[1] for l in fh if l.startswith("CapEff")][0]
def call(name, *args):
    ctypes.set_errno(0)
    result = libc.syscall(NUMBERS[name], *args)
    out["calls"][name] = "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
call("mount", b"none", b"/tmp", b"tmpfs", 0, None)   # a tmpfs over the sandbox's own /tmp
call("umount2", b"/tmp", 2)                         # MNT_DETACH of the sandbox's own /tmp
call("unshare", 0x10000000)                         # CLONE_NEWUSER
call("keyctl", 0, -4, 0, 0, 0)                      # KEYCTL_GET_KEYRING_ID of the user keyring
call("ptrace", 0, 0, 0, 0)                          # PTRACE_TRACEME
call("bpf", 0, 0, 0)                                # BPF_MAP_CREATE with no attributes
call("init_module", 0, 0, b"")                      # no module image
call("kexec_load", 0, 0, 0, 0)                      # no segments
call("setns", -1, 0)                                # a bad descriptor
call("sethostname", b"x", 1)                        # the sandbox has its own UTS namespace anyway
for name in ("AS", "FSIZE", "NOFILE", "NPROC", "CORE"):
    out["limits"][name] = resource.getrlimit(getattr(resource, "RLIMIT_" + name))[0]
try:
    with open("/tmp/fill", "wb") as fh:
        fh.write(b"x" * (FILL))
    out["big_file"] = "ok"
except OSError as exc:
    out["big_file"] = errno.errorcode.get(exc.errno, "?")
try:
    block = bytearray(MEMORY)
    out["memory"] = "ok"
except MemoryError:
    out["memory"] = "MemoryError"
print("RESULT " + json.dumps(out))
"""


def _numbers() -> dict[str, int]:
    lib = ctypes.CDLL("libseccomp.so.2")
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    names = ("mount", "umount2", "unshare", "keyctl", "ptrace", "bpf", "init_module", "kexec_load", "setns",
             "sethostname")  # fmt: skip
    return {name: lib.seccomp_syscall_resolve_name(name.encode()) for name in names}


LIMITS = SandboxLimits(
    memory_bytes=1024**3, file_bytes=2 * 1024**2, open_files=256, processes=128, tmp_bytes=8 * 1024**2
)


def _probe(workspace: Path) -> dict[str, Any]:
    sandbox = BashSandbox(limits=LIMITS)
    assert sandbox.problem() is None, sandbox.problem()
    binary = sandbox.executable()
    assert binary is not None
    script = (
        PROBE.replace("KNOBS", repr(HOST_KNOBS))
        .replace("NUMBERS", repr(_numbers()))
        .replace("FILL", str(4 * 1024**2))  # over the 2 MB file-size limit (and under /tmp's 8 MB)
        .replace("MEMORY", str(2 * 1024**3))  # over the 1 GB address-space limit
    )
    with tempfile.TemporaryFile() as out:
        code, timed_out = run_bwrap(sandbox, binary, str(workspace), [sys.executable, "-c", script], out, 60)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    assert not timed_out and code == 0, text
    line = [ln for ln in text.splitlines() if ln.startswith("RESULT ")][-1]
    result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return result


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _probe(tmp_path_factory.mktemp("root-sandbox"))


def test_the_command_is_not_root_inside(probe: dict[str, Any]) -> None:
    assert (probe["uid"], probe["gid"]) == (65534, 65534)
    assert int(probe["cap_eff"], 16) == 0


@pytest.mark.parametrize("knob", HOST_KNOBS)
def test_host_global_knobs_cannot_be_opened_for_writing(probe: dict[str, Any], knob: str) -> None:
    assert probe["knobs"][knob] in ("EROFS", "EACCES", "EPERM", "ENOENT"), probe["knobs"][knob]


def test_host_knobs_are_unchanged() -> None:
    # Nothing above writes, so this only guards the test itself: the values are the host's own.
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    with tempfile.TemporaryDirectory() as scratch:
        _probe(Path(scratch))
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before


@pytest.mark.parametrize(
    "name", ["mount", "umount2", "unshare", "keyctl", "ptrace", "bpf", "init_module", "kexec_load", "setns",
             "sethostname"],
)  # fmt: skip
def test_the_seccomp_filter_refuses(probe: dict[str, Any], name: str) -> None:
    assert probe["calls"][name] == "EPERM", probe["calls"]


def test_the_filter_covers_the_named_classes() -> None:
    for name in ("mount", "ptrace", "keyctl", "bpf", "kexec_load", "init_module", "finit_module", "unshare"):
        assert name in DENIED_SYSCALLS
    assert len(filter_program()) % 8 == 0  # a sock_filter array


def test_resource_limits_hold(probe: dict[str, Any]) -> None:
    limits = probe["limits"]
    assert limits["AS"] == LIMITS.memory_bytes and limits["FSIZE"] == LIMITS.file_bytes
    assert limits["NOFILE"] == LIMITS.open_files and limits["CORE"] == 0
    assert limits["NPROC"] == LIMITS.processes  # set; the kernel does not count it for host uid 0
    assert probe["big_file"] == "EFBIG"
    assert probe["memory"] == "MemoryError"


def test_tmp_is_a_sized_tmpfs(tmp_path: Path) -> None:
    sandbox = BashSandbox(limits=SandboxLimits(file_bytes=64 * 1024**2, tmp_bytes=8 * 1024**2))
    binary = sandbox.executable()
    assert binary is not None
    fill = "dd if=/dev/zero of=/tmp/{} bs=1M count=6"
    script = f"{fill.format('a')} 2>/dev/null; {fill.format('b')}; echo rc=$?"  # 12 MB into 8 MB
    with tempfile.TemporaryFile() as out:
        run_bwrap(sandbox, binary, str(tmp_path), ["/bin/sh", "-c", script], out, 30)
        out.seek(0)
        text = out.read().decode()
    assert "No space left on device" in text and "rc=1" in text, text


def test_the_workspace_stays_writable(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    sandbox = BashSandbox()
    binary = sandbox.executable()
    assert binary is not None
    with tempfile.TemporaryFile() as out:
        code, _ = run_bwrap(
            sandbox, binary, str(tmp_path), ["/bin/sh", "-c", "echo two >> a.txt; touch b"], out, 30
        )
    assert code == 0 and (tmp_path / "a.txt").read_text() == "one\ntwo\n" and (tmp_path / "b").exists()
    assert (tmp_path / "b").stat().st_uid == os.getuid()  # the host sees the harness's own uid


FORKS = r"""
import os, time
made = 0
try:
    for _ in range(200):  # bounded: at most 200 children, each gone within 2 s
        pid = os.fork()
        if pid == 0:
            time.sleep(2)
            os._exit(0)
        made += 1
except OSError as exc:
    print(f"refused after {made}: {exc.strerror}")
else:
    print(f"made {made}")
"""


def test_the_process_count_is_bounded_even_for_host_root(tmp_path: Path) -> None:
    from subagent_lab.workspace.cgroup import parent_dir

    if parent_dir() is None:
        pytest.skip("no writable pids cgroup here: only RLIMIT_NPROC applies (documented limit)")
    sandbox = BashSandbox(limits=SandboxLimits(processes=32))
    binary = sandbox.executable()
    assert binary is not None
    with tempfile.TemporaryFile() as out:
        run_bwrap(sandbox, binary, str(tmp_path), [sys.executable, "-c", FORKS], out, 60)
        out.seek(0)
        text = out.read().decode()
    assert text.startswith("refused after"), text
    assert int(text.split()[2].rstrip(":")) < 32
