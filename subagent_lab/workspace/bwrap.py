"""The OS sandbox the main agent's Bash runs in: bubblewrap (``bwrap``, Debian package ``bubblewrap``).

The command sees a private root: the system (``/usr`` and the ``/bin``, ``/lib*`` links, a
few harmless ``/etc`` files) and the harness's Python read-only, the workspace (the scratch
copy) as the only writable mount, at its own path, a tmpfs ``/tmp`` with an empty ``HOME`` in
it, a minimal ``/dev`` and a fresh ``/proc`` of its own pid namespace. Every namespace is
unshared (no network, no view of the host's processes), all capabilities are dropped, the
environment is an allow-list, and ``bwrap`` itself starts from a scrubbed environment, so the
sandbox's pid 1 shows nothing of the harness's variables in ``/proc/1/environ``. The real
target, the harness's cache, traces and home directory are not mounted at all.

When the pid namespace's first process dies, the kernel kills every process left in it, so a
background job (``setsid -f``, ``nohup ... &``) cannot outlive the call; on a timeout that
process is killed directly (``--info-fd`` says which it is) along with ``bwrap``'s group.

Run by root, bubblewrap's own namespaces would leave the command the machine's real root, and
``/proc/sys`` of a fresh procfs is writable by it (a crash-handler setting there makes the kernel
run a program as root outside any sandbox; dropping capabilities does not stop that). So the
command runs in a user namespace of its own, as uid/gid 65534 (``nobody``) with no capability
in the host's namespace, and cannot make further user namespaces; ``/proc/sys`` and the other
host-global corners of ``/proc`` are mounted read-only over the fresh procfs; a seccomp filter
(``subagent_lab.workspace.seccomp``) refuses mount, ptrace, keyctl, bpf, kexec, module loading,
clock, host-name and namespace calls; and ``prlimit`` bounds address space, file size, open
files and core dumps, a transient pids cgroup bounds the number of processes (the rlimit does
not, for a host uid 0), and ``/tmp`` (with ``HOME``) is a tmpfs of a fixed size.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from subagent_lab.workspace.cgroup import PidsGroup
from subagent_lab.workspace.seccomp import SECCOMP_PACKAGE, SeccompUnavailable, filter_program, program_fd

BWRAP_PACKAGE = "bubblewrap"
SandboxMode = Literal["bwrap", "none"]
SYSTEM_PATHS: tuple[str, ...] = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Mounted read-only (a merged-/usr link such as ``/bin -> usr/bin`` is re-created as a link)."""
ETC_FILES: tuple[str, ...] = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf",
    "localtime", "timezone", "hosts", "os-release",
)  # fmt: skip
"""The only ``/etc`` entries mounted (read-only): what dynamic linking and user lookup need."""
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_BWRAP_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
"""The whole environment ``bwrap`` starts with: its pid 1 inside shows exactly this."""
_REAP_WAIT_S = 5.0
SANDBOX_UID = 65534
"""The uid and gid the command runs as inside its user namespace (``nobody``)."""
PROC_READ_ONLY: tuple[str, ...] = ("sys", "sysrq-trigger", "irq", "bus", "fs", "fs/binfmt_misc")
"""Host-global parts of ``/proc`` mounted read-only over the sandbox's fresh procfs."""
PRLIMIT = "/usr/bin/prlimit"
"""util-linux's ``prlimit`` (Debian: essential), inside the sandbox at the same path."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed command (``prlimit`` values and the ``/tmp`` size)."""

    memory_bytes: int = 8 * 1024**3
    """RLIMIT_AS: address space per process (a JIT or ``mmap`` of a large file needs room)."""
    file_bytes: int = 1024**3
    """RLIMIT_FSIZE: the largest file a command may write."""
    open_files: int = 1024
    """RLIMIT_NOFILE."""
    processes: int = 512
    """Processes of one command: a pids cgroup where one can be made (``workspace.cgroup``), and
    RLIMIT_NPROC (counted per host uid, which the kernel does not do for a host uid 0)."""
    tmp_bytes: int = 512 * 1024**2
    """Size of the tmpfs on ``/tmp`` (with ``HOME`` inside it)."""

    def prlimit_argv(self) -> list[str]:
        """The ``prlimit`` prefix setting these limits (soft and hard) for the command."""
        return [
            PRLIMIT, f"--as={self.memory_bytes}", f"--fsize={self.file_bytes}",
            f"--nofile={self.open_files}", f"--nproc={self.processes}", "--core=0", "--",
        ]  # fmt: skip


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def python_paths() -> tuple[str, ...]:
    """The harness's interpreter trees (venv and base install) outside the system directories."""
    paths: list[str] = []
    for prefix in (
        sys.prefix,
        sys.base_prefix,
        os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
    ):
        real = os.path.realpath(prefix)
        if real != "/" and real not in paths and not any(_inside(real, s) for s in SYSTEM_PATHS):
            paths.append(real)
    return tuple(paths)


@dataclass(frozen=True)
class BashSandbox:
    """How the main agent's Bash runs.

    Args:
        mode: ``bwrap`` (default): inside bubblewrap, and disabled where it cannot run; ``none``:
            unsandboxed, only the scratch copy and the classifier protect the machine (opt-in).
        ro_paths: Extra directories mounted read-only (a toolchain, say); the harness's Python is
            always mounted so that ``python``, ``pytest`` and ``rg`` work.
        hide: Paths never mounted, whatever ``ro_paths`` says (the real target).
        binary: The ``bwrap`` to use (default: the one on PATH).
        limits: Resource limits of each command.
    """

    mode: SandboxMode = "bwrap"
    ro_paths: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()
    binary: str | None = None
    limits: SandboxLimits = SandboxLimits()

    def executable(self) -> str | None:
        """The absolute path of ``bwrap``, or None when it is not installed."""
        if self.binary is not None:
            return self.binary if os.path.isfile(self.binary) and os.access(self.binary, os.X_OK) else None
        path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin", "/usr/local/bin", "/bin"])
        return shutil.which("bwrap", path=path)

    def problem(self) -> str | None:
        """Why Bash cannot run sandboxed here (None when it can, or when the mode is ``none``)."""
        if self.mode == "none":
            return None
        binary = self.executable()
        if binary is None:
            return (
                f"bwrap is not installed (Debian package '{BWRAP_PACKAGE}': apt-get install {BWRAP_PACKAGE})"
            )
        try:
            filter_program()
        except SeccompUnavailable as exc:
            return f"the seccomp filter cannot be built ({exc}; Debian package '{SECCOMP_PACKAGE}')"
        if not os.access(PRLIMIT, os.X_OK):
            return f"{PRLIMIT} is missing (Debian package 'util-linux'): resource limits cannot be set"
        return _probe(binary)

    def status(self) -> str:
        """One line for traces and results: how Bash runs in this run."""
        if self.mode == "none":
            return "none: unsandboxed (the profile opted in with bash_sandbox: none)"
        problem = self.problem()
        return f"disabled: {problem}" if problem else "bwrap"

    def note(self) -> str:
        """What the model is told about Bash in this run: nothing when it runs sandboxed."""
        status = self.status()
        if status == "bwrap":
            return ""
        if self.mode == "none":
            return "Note: Bash runs without an OS sandbox in this run (bash_sandbox: none)."
        return f"Note: Bash is {status}. Use Read, Grep, Glob and Edit instead."

    def mounts(self, workspace: str) -> list[str]:
        """The read-only directories given to the command (system directories excluded)."""
        hidden = [os.path.realpath(h) for h in self.hide]
        out: list[str] = []
        for path in (*python_paths(), *self.ro_paths):
            real = os.path.realpath(path)
            clash = any(_inside(real, h) or _inside(h, real) for h in [*hidden, workspace])
            if os.path.isdir(real) and not clash and real not in out:
                out.append(real)
        return out

    def argv(
        self, binary: str, workspace: str, command: list[str], *, seccomp_fd: int | None = None
    ) -> list[str]:
        """The ``bwrap`` command line running ``command`` in ``workspace``.

        ``seccomp_fd``: a readable descriptor of the filter program (``seccomp.program_fd``),
        passed to ``bwrap``; None builds the command line without the filter (the benchmark's
        "before" figure and the probe of bubblewrap alone).
        """
        home = "/tmp/home" if not _inside(workspace, "/tmp/home") else "/tmp/.sandbox-home"
        args = [
            binary, "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--clearenv", "--hostname", "sandbox",
        ]  # fmt: skip
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        for path in SYSTEM_PATHS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for name in ETC_FILES:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        # The tmpfs /tmp first: bwrap applies mounts in order, so a harness (or a checkout) that
        # lives under /tmp stays visible through the binds that follow instead of being hidden.
        args += ["--proc", "/proc"]
        for name in PROC_READ_ONLY:  # over the fresh procfs: bound from the host's, read-only
            args += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
        args += ["--dev", "/dev", "--size", str(self.limits.tmp_bytes), "--tmpfs", "/tmp", "--dir", home]
        mounts = self.mounts(workspace)
        for path in mounts:
            args += ["--ro-bind", path, path]
        args += ["--bind", workspace, workspace, "--chdir", workspace]
        env = {
            "PATH": ":".join([*(f"{p}/bin" for p in mounts if os.path.isdir(f"{p}/bin")), SANDBOX_PATH]),
            "HOME": home,
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CEILING_DIRECTORIES": os.path.dirname(workspace),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
        }
        for key, value in env.items():
            args += ["--setenv", key, value]
        return [*args, "--", *self.limits.prlimit_argv(), *command]


@functools.lru_cache(maxsize=8)
def _probe(binary: str) -> str | None:
    """None when ``binary`` can build the sandbox here, else why not (cached per process)."""
    fd = program_fd()
    with tempfile.TemporaryDirectory(prefix="bwrap-probe-") as scratch:
        argv = BashSandbox(binary=binary).argv(
            binary, os.path.realpath(scratch), ["/bin/sh", "-c", "true"], seccomp_fd=fd
        )
        try:
            done = subprocess.run(
                argv,
                env=_BWRAP_ENV,
                capture_output=True,
                timeout=20,
                stdin=subprocess.DEVNULL,
                pass_fds=(fd,),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap could not be started ({exc})"
        finally:
            os.close(fd)
    if done.returncode != 0:
        error = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no error output"]
        return (
            f"bwrap cannot create its namespaces here ({error[0]}); on a container host allow user "
            f"namespaces, or run as root (Debian package '{BWRAP_PACKAGE}')"
        )
    return None


def run_bwrap(
    sandbox: BashSandbox, binary: str, workspace: str, command: list[str], out: IO[bytes], limit: float
) -> tuple[int, bool]:
    """Run ``command`` in the sandbox, output to ``out``; ``(exit code, timed out)``.

    Returns only once every process of the sandbox is gone.
    """
    seccomp = program_fd()
    info_read, info_write = os.pipe()
    argv = sandbox.argv(binary, workspace, command, seccomp_fd=seccomp)
    argv[1:1] = ["--info-fd", str(info_write)]
    group = PidsGroup.create(sandbox.limits.processes)
    if group is not None:
        # The host's shell joins the pids group, then becomes bwrap: every process of the
        # sandbox is born inside the group, which counts them whatever their uid.
        argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', group.procs, *argv]
    try:
        proc = subprocess.Popen(
            argv,
            env=_BWRAP_ENV,
            stdin=subprocess.DEVNULL,
            stdout=out,  # a file, not a pipe: huge output costs disk, not memory, and never blocks
            stderr=subprocess.STDOUT,
            pass_fds=(info_write, seccomp),
            start_new_session=True,
        )
    finally:
        os.close(info_write)
        os.close(seccomp)
    timed_out = False
    try:
        # The read end stays open until bwrap is gone: it writes more after the pid, and a
        # closed pipe would kill it with SIGPIPE.
        child = _child_pid(info_read, time.monotonic() + min(limit, 10.0))
        try:
            code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            if child is not None:
                _kill(child)  # the namespace's first process: the kernel then kills all the others
            _kill_group(proc.pid)
            code = proc.wait()
    finally:
        _kill_group(proc.pid)
        os.close(info_read)
    if child is not None:
        _wait_gone(child)
    if group is not None:
        group.remove()
    return code, timed_out


def _child_pid(fd: int, deadline: float) -> int | None:
    """The host pid of the sandbox's pid 1, from bwrap's ``--info-fd`` JSON (None if never told)."""
    pattern = re.compile(rb'"child-pid":\s*(\d+)\s*[,}\n]')
    data = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while (match := pattern.search(data)) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            data += chunk
    return int(match[1])


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _wait_gone(pid: int) -> None:
    """Wait until ``pid`` has exited (a zombie has: its namespace was emptied before it died)."""
    deadline = time.monotonic() + _REAP_WAIT_S
    status = Path(f"/proc/{pid}/stat")
    while time.monotonic() < deadline:
        try:
            state = status.read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.01)
    _kill(pid)
