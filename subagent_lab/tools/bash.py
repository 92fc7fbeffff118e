"""The Bash tool (main agent only): one shell command in the workspace, inside an OS sandbox.

Two layers, with different jobs. The policy layer the user sees is ``tools.bash_policy``
(``classify_command``, re-exported here): it sorts a command line into ``allow``, ``deny`` and
``ask``, and ``ask`` follows the agent's ask policy, which denies by default. It is syntactic
(bash expands the line after it was checked: ``$x`` may name anything), so it is not the
boundary: the command runs in bubblewrap (``subagent_lab.workspace.bwrap``), where only the
workspace (the scratch copy) is writable, nothing else of the host's files but the system is
visible, there is no network, and no process outlives the call. Where bubblewrap cannot run, Bash
is disabled unless the profile opts into running it unsandboxed (``bash_sandbox: none``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from typing import IO, Literal, Protocol

from subagent_lab.core.tool import ToolDeniedError, ToolError
from subagent_lab.tools.bash_policy import SAFE_COMMANDS, classify_command, explain_command
from subagent_lab.workspace.bwrap import BashSandbox, run_bwrap
from subagent_lab.workspace.sandbox import Workspace

__all__ = ["OUTPUT_CAP", "SAFE_COMMANDS", "BashContext", "bash", "classify_command", "explain_command"]

OUTPUT_CAP = 12_000
"""Characters of output returned (head and tail), under the harness's 16 000-character cap."""
FILE_SIZE_LIMIT_BLOCKS = 200_000
"""``ulimit -f`` for the command (512-byte blocks, ~100 MB): a runaway writer cannot fill the disk."""


class BashContext(Protocol):
    """What Bash needs: the workspace, the ask policy and the per-command time limit.

    A context may also carry ``bash_sandbox`` (a ``BashSandbox``); without one Bash runs in
    bubblewrap with the default mounts.
    """

    @property
    def workspace(self) -> Workspace: ...

    @property
    def ask_policy(self) -> Literal["allow", "deny"]: ...

    @property
    def bash_timeout_s(self) -> int: ...


def unsandboxed_env(home: str) -> dict[str, str]:
    """The environment of an unsandboxed command: an allow-list, HOME an empty directory of its own."""
    env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ") if k in os.environ}
    env.update(HOME=home, TMPDIR=home, GIT_TERMINAL_PROMPT="0", PAGER="cat", GIT_PAGER="cat", TERM="dumb")
    env.update(GIT_CONFIG_NOSYSTEM="1", PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
    return env


def _read_capped(handle: IO[bytes], size: int) -> str:
    half = OUTPUT_CAP // 2
    handle.seek(0)
    if size <= OUTPUT_CAP:
        return handle.read().decode("utf-8", errors="replace")
    head = handle.read(half).decode("utf-8", errors="replace")
    handle.seek(size - half)
    tail = handle.read().decode("utf-8", errors="replace")
    return f"{head}\n[... {size - 2 * half} bytes of output omitted ...]\n{tail}"


def bash(ctx: BashContext, command: str, timeout_s: int = 60) -> str:
    """Run a shell command in the workspace root and return its exit code and output.

    Read-only commands (ls, cat, grep, find, git status/diff/log, pytest ...) run directly;
    destructive, networked or escaping commands (sudo, curl, rm -rf, paths outside the
    workspace) are refused, and other commands need approval. Commands run in a sandbox: only
    the workspace is writable and visible, there is no network, and background processes end
    with the command. Output is capped (head and tail).

    Args:
        command: The command line, run with bash in the workspace root.
        timeout_s: Seconds before the command is killed (capped by the agent's limit).
    """
    sandbox: BashSandbox = getattr(ctx, "bash_sandbox", None) or BashSandbox()
    problem = sandbox.problem()
    if problem is not None:
        raise ToolDeniedError(
            f"Bash is disabled: it runs only inside an OS sandbox, and {problem}. Use Read, Grep, Glob "
            "and Edit instead (an operator can opt into unsandboxed Bash with bash_sandbox: none)."
        )
    root = str(ctx.workspace.root)
    verdict, reason = explain_command(command, root=root)
    if verdict == "deny":
        raise ToolDeniedError(f"command refused: {reason}")
    if verdict == "ask" and ctx.ask_policy != "allow":
        raise ToolDeniedError(
            f"command needs approval ({reason}) and the ask policy is 'deny'; commands that run without "
            f"approval: {', '.join(sorted(SAFE_COMMANDS))}, git status/diff/log/show, python -m pytest"
        )
    limit = max(1, min(timeout_s, ctx.bash_timeout_s))
    script = f"ulimit -f {FILE_SIZE_LIMIT_BLOCKS} 2>/dev/null\n{command}"
    with tempfile.TemporaryFile() as out:
        if sandbox.mode == "bwrap":
            binary = sandbox.executable()
            assert binary is not None  # problem() said it runs
            shell = ["/bin/bash", "--noprofile", "--norc", "-c", script]
            try:
                code, timed_out = run_bwrap(sandbox, binary, root, shell, out, limit)
            except OSError as exc:
                raise ToolError(f"cannot start the sandbox: {exc.strerror}") from None
        else:
            code, timed_out = _run_unsandboxed(root, script, out, limit)
        size = os.fstat(out.fileno()).st_size
        text = _read_capped(out, size)
    status = f"timed out after {limit}s; the command was killed" if timed_out else f"exit code {code}"
    return f"[{status}]\n{text}" if text.strip() else f"[{status}] (no output)"


def _run_unsandboxed(root: str, script: str, out: IO[bytes], limit: int) -> tuple[int, bool]:
    """The opt-in fallback: bash in the workspace, its own process group, HOME a fresh empty directory."""
    shell = shutil.which("bash") or "/bin/bash"
    with tempfile.TemporaryDirectory(prefix="subagent-bash-home-") as home:
        try:
            proc = subprocess.Popen(
                [shell, "--noprofile", "--norc", "-c", script],
                cwd=root,
                env=unsandboxed_env(home),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so a timeout kills grandchildren too
            )
        except OSError as exc:
            raise ToolError(f"cannot start bash: {exc.strerror}") from None
        timed_out = False
        try:
            code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            code = proc.wait()
        _kill_group(proc.pid)  # background jobs the command left behind (setsid escapes this)
    return code, timed_out


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
