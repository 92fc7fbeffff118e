"""The Bash tool (main agent only): one shell command in the workspace, inside an OS sandbox.

Two layers, with different jobs. ``classify_command`` is the policy layer the user sees: it sorts
a command line into ``allow`` (a small list of read-only commands), ``deny`` (destructive,
networked, privileged or escaping commands, refused with the reason) and ``ask`` (everything
else), and ``ask`` follows the agent's ask policy, which denies by default. The line is parsed
with a real shell parser (``bashlex``, a port of bash's own grammar), and every simple command
in it is judged: inside ``{ ...; }``, subshells, ``if``/``while``/``for`` bodies, functions,
pipelines, ``$(...)``, backticks and ``<(...)``, and behind ``exec``, ``command``, ``builtin``,
``eval`` and the wrappers (``env``, ``timeout``, ``watch`` ...), in a shell's ``-c`` script however
the shell is invoked (``bash -lc``, parsed again), and after git's global options (``git -C dir``,
``git -c key=value``); a recursive ``rm`` of a word bash expands later (``$X``, globs) is refused
(``tools.bash_forms`` finds these). What the parser cannot parse (``case``,
``[[ ]]``, ``$((...))``) is refused, never guessed at. It is still syntactic (bash expands the
line after it was checked: ``$x`` may name anything), so it is not the boundary: the
command runs in bubblewrap (``subagent_lab.workspace.bwrap``), where only the workspace (the scratch
copy) is writable, nothing else of the host's files but the system is visible, there is no
network, and no process outlives the call. Where bubblewrap cannot run, Bash is disabled unless
the profile opts into running it unsandboxed (``bash_sandbox: none``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from typing import IO, Any, Literal, Protocol

from subagent_lab.core.tool import ToolDeniedError, ToolError
from subagent_lab.tools.bash_forms import Verdict, git_command, rm_verdict, shell_script, wrapped_command
from subagent_lab.workspace.bwrap import BashSandbox, run_bwrap
from subagent_lab.workspace.sandbox import Workspace

MAX_NESTING = 16
"""Levels of commands inside commands (``bash -c`` scripts, wrappers, substitutions) analysed;
deeper ones are refused."""
MAX_SCRIPT_NESTING = 8
"""The level past which a command that hands a script to the parser again (``eval``, a shell's
``-c``, ``watch``, ``env -S``) is refused: each level parses up to the whole line again."""
_SCRIPT_RUNNERS = frozenset({"eval", "watch", "env", "bash", "sh", "zsh", "dash", "ksh"})

OUTPUT_CAP = 12_000
"""Characters of output returned (head and tail), under the harness's 16 000-character cap."""
FILE_SIZE_LIMIT_BLOCKS = 200_000
"""``ulimit -f`` for the command (512-byte blocks, ~100 MB): a runaway writer cannot fill the disk."""

SAFE_COMMANDS: frozenset[str] = frozenset(
    {"ls", "cat", "head", "tail", "wc", "grep", "rg", "find", "pwd", "echo", "sort", "uniq", "diff",
     "tree", "stat", "file", "true", "cd", "basename", "dirname", "pytest"}
)  # fmt: skip
"""Commands allowed without approval (arguments are still checked for paths and redirections)."""
SAFE_GIT: frozenset[str] = frozenset({"status", "diff", "log", "show"})
DENY_COMMANDS: frozenset[str] = frozenset(
    {"sudo", "su", "doas", "pkexec", "curl", "wget", "nc", "ncat", "netcat", "socat", "ssh", "scp", "sftp",
     "rsync", "telnet", "ftp", "mkfs", "dd", "shred", "shutdown", "reboot", "halt", "poweroff", "kill",
     "pkill", "killall", "mount", "umount", "chroot", "chown", "crontab", "systemctl", "docker", "iptables"}
)  # fmt: skip
WRAPPERS: frozenset[str] = frozenset({"env", "xargs", "nohup", "time", "timeout", "nice", "stdbuf", "watch"})
"""Commands that run another command: every argument is checked against the deny list."""
SHELLS: frozenset[str] = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_NETWORK_SUBCOMMANDS = {
    "git": {"push", "pull", "fetch", "clone", "remote", "submodule", "send-email"},
    "pip": {"install", "download", "upload"},
    "pip3": {"install", "download", "upload"},
    "npm": {"install", "i", "publish", "ci"},
    "uv": {"pip", "add", "sync"},
}
_FIND_ACTIONS = {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
_REDIRECTS = {">", ">>", ">|", "&>", "&>>", ">&", "<", "<<", "<<<", "<>"}
_FORK_BOMB = re.compile(r"(\w+|:)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1")
_PARENT = re.compile(r"(^|/)\.\.(/|$)")
_RANK: dict[Verdict, int] = {"allow": 0, "ask": 1, "deny": 2}


def _worst(a: tuple[Verdict, str], b: tuple[Verdict, str]) -> tuple[Verdict, str]:
    return b if _RANK[b[0]] > _RANK[a[0]] else a


def _path_verdict(token: str, root: str | None) -> tuple[Verdict, str]:
    """Refuse a word that names a place outside the workspace (``..``, ``~``, absolute paths)."""
    for part in {token, token.partition("=")[2]} - {""}:
        if part.startswith("~"):
            return "deny", f"{part!r} refers to a home directory outside the workspace"
        if _PARENT.search(part):
            return "deny", f"{part!r} uses '..'; paths must stay inside the workspace"
        if part.startswith("/") and part != "/dev/null":
            inside = root is not None and (part == root or part.startswith(root.rstrip("/") + "/"))
            if not inside:
                return "deny", f"{part!r} is an absolute path outside the workspace"
    return "allow", ""


def _segment_verdict(words: list[str], root: str | None, depth: int) -> tuple[Verdict, str]:
    """The verdict for one simple command (no separators), redirections included."""
    verdict: tuple[Verdict, str] = ("allow", "")
    args: list[str] = []
    expect_target = False
    for word in words:
        if word in _REDIRECTS or (word.endswith((">", ">>")) and word.rstrip(">&").isdigit()):
            if word in ("<<", "<<<"):
                verdict = _worst(verdict, ("ask", "here-documents are not analysed"))
            expect_target = word not in ("<", "<<", "<<<")
            continue
        if expect_target:
            expect_target = False
            if word.startswith("/dev/") and word != "/dev/null":
                return "deny", f"writing to {word} is not allowed"
            if word not in ("/dev/null", "&1", "&2", "1", "2"):
                verdict = _worst(verdict, ("ask", f"the output is redirected into {word!r}"))
        verdict = _worst(verdict, _path_verdict(word, root))
        if "$" in word:
            verdict = _worst(verdict, ("ask", f"{word!r} expands a variable"))
        args.append(word)
    if verdict[0] == "deny" or not args:
        return verdict
    while args and re.match(r"^[A-Za-z_]\w*=", args[0]):
        verdict = _worst(verdict, ("ask", "the command sets environment variables"))
        args = args[1:]
    if not args:
        return verdict
    name, rest = os.path.basename(args[0]), args[1:]
    return _worst(verdict, _command_verdict(name, rest, root, depth))


def _command_verdict(name: str, rest: list[str], root: str | None, depth: int) -> tuple[Verdict, str]:
    if name in DENY_COMMANDS:
        return "deny", f"{name} is not allowed (privileged, networked or destructive)"
    if depth > MAX_NESTING or (depth > MAX_SCRIPT_NESTING and name in _SCRIPT_RUNNERS):
        return "deny", "the command is nested too deeply to be analysed"
    sub = next((a for a in rest if not a.startswith("-")), "")
    options: tuple[Verdict, str] = ("allow", "")
    if name == "git":  # the subcommand comes after git's global options (-C dir, -c key=value)
        sub, options = git_command(rest)
        if options[0] == "deny":
            return options
    if sub in _NETWORK_SUBCOMMANDS.get(name, ()):
        return "deny", f"'{name} {sub}' reaches the network or outside the workspace"
    if name in ("chmod", "chgrp") and any(a.startswith("-") and "R" in a for a in rest):
        return "deny", f"recursive {name} is not allowed"
    if name == "rm":
        return rm_verdict(rest)
    if name in WRAPPERS:
        for arg in rest:
            if os.path.basename(arg) in DENY_COMMANDS:
                return "deny", f"{arg} is not allowed, even through {name}"
        words, line = wrapped_command(name, rest)
        verdict: tuple[Verdict, str] = ("ask", f"{name} runs another command")
        if words:
            verdict = _worst(
                verdict, _command_verdict(os.path.basename(words[0]), words[1:], root, depth + 1)
            )
        if line is not None:
            verdict = _worst(verdict, explain_command(line, root=root, _depth=depth + 1))
        return verdict
    if name in ("exec", "command", "builtin"):
        args = list(rest)
        while args and args[0].startswith("-"):  # exec -a NAME, command -p / -v, builtin --
            args = args[2:] if (name, args[0]) == ("exec", "-a") else args[1:]
        if not args:
            return ("allow", "") if name == "exec" else ("ask", f"{name} with no command")
        inner = _command_verdict(os.path.basename(args[0]), args[1:], root, depth + 1)
        return _worst(
            ("ask", f"exec replaces the shell with {args[0]}") if name == "exec" else ("allow", ""), inner
        )
    if name == "eval":
        script = " ".join(rest) or "true"
        return _worst(("ask", "eval runs a script"), explain_command(script, root=root, _depth=depth + 1))
    if name in SHELLS:
        kind, text = shell_script(rest)
        if kind == "script":  # parsed and judged like the line itself, however deep
            return _worst(
                ("ask", f"{name} runs a script"), explain_command(text, root=root, _depth=depth + 1)
            )
        if kind == "stdin":
            return "deny", f"{name} reads its script from standard input, which cannot be checked"
        return "ask", f"{name} runs the script file {text!r}, which is not analysed"
    if name in ("source", "."):
        return "ask", f"{name} runs code that is not analysed"
    if name == "find" and any(a in _FIND_ACTIONS for a in rest):
        return "ask", "find with an action (-exec, -delete ...) is not read-only"
    if name == "git":
        return _worst(
            options,
            ("allow", "") if sub in SAFE_GIT else ("ask", f"git {sub or ''} is not on the read-only list"),
        )
    if name in ("python", "python3") and rest[:2] == ["-m", "pytest"]:
        return "allow", ""
    if name == "cd" and not rest:
        return "deny", "cd without a path goes to the home directory"
    if name in SAFE_COMMANDS:
        return "allow", ""
    return "ask", f"{name} is not on the list of commands that run without approval"


MAX_COMMAND_CHARS = 64 * 1024
"""A longer command line is refused unparsed (the parser's cost grows with it)."""
_SUBST_KINDS = frozenset({"commandsubstitution", "processsubstitution"})


def explain_command(command: str, *, root: str | None = None, _depth: int = 0) -> tuple[Verdict, str]:
    """``(verdict, reason)`` for a shell command line; see ``classify_command``."""
    if not command.strip():
        return "deny", "the command is empty"
    if "\x00" in command:
        return "deny", "the command contains a NUL byte"
    if len(command) > MAX_COMMAND_CHARS:
        return "deny", f"the command is over {MAX_COMMAND_CHARS:,} characters"
    if _FORK_BOMB.search(command):
        return "deny", "fork bomb"
    import bashlex  # a pure-Python port of bash's parser; imported here: only Bash needs it

    try:
        trees = bashlex.parse(command)
    except Exception as exc:  # ParsingError, NotImplementedError (case, [[ ]], $((..))), its own bugs
        detail = f"{type(exc).__name__}: {exc}"[:160]
        return "deny", f"the command cannot be parsed, so it is not run ({detail}); use plainer shell"
    verdict: tuple[Verdict, str] = ("allow", "")
    for tree in trees:
        verdict = _worst(verdict, _node_verdict(tree, root, _depth))
    return verdict


def _node_verdict(node: Any, root: str | None, depth: int) -> tuple[Verdict, str]:
    """The worst verdict of every command in a parse tree (``bashlex`` nodes)."""
    if depth > MAX_NESTING:
        return "deny", "the command is nested too deeply to be analysed"
    kind = node.kind
    if kind == "command":
        return _simple_verdict(node, root, depth)
    if kind in _SUBST_KINDS:
        return _worst(("ask", "command substitution"), _node_verdict(node.command, root, depth + 1))
    verdict: tuple[Verdict, str] = ("allow", "")
    if kind == "operator" and node.op == "&":
        verdict = ("ask", "background jobs are not allowed without approval")
    if kind == "word":  # a word outside a simple command: a ``for`` loop's list
        verdict = _worst(_words_verdict(node), _path_verdict(node.word, root))
    redirects = getattr(node, "redirects", None) or []
    if redirects:  # ``while ...; done < f``, ``{ ...; } > out``
        words = [w for r in redirects for w in _redirect_words(r)]
        verdict = _worst(verdict, _segment_verdict(["true", *words], root, depth))
        for r in redirects:
            verdict = _worst(
                verdict, _words_verdict(r.output) if hasattr(r.output, "kind") else ("allow", "")
            )
    children = [*(getattr(node, "parts", None) or []), *(getattr(node, "list", None) or [])]
    inner = getattr(node, "command", None)
    for child in [*children, *([inner] if inner is not None else [])]:
        if hasattr(child, "kind"):
            verdict = _worst(verdict, _node_verdict(child, root, depth + 1))
    return verdict


def _words_verdict(word: Any) -> tuple[Verdict, str]:
    """The substitutions inside one word (``$(...)``, backticks, ``<(...)``)."""
    verdict: tuple[Verdict, str] = ("allow", "")
    for part in getattr(word, "parts", None) or []:
        if part.kind in _SUBST_KINDS:
            verdict = _worst(verdict, ("ask", "command substitution"))
            verdict = _worst(verdict, _node_verdict(part.command, None, 1))
        elif hasattr(part, "parts"):
            verdict = _worst(verdict, _words_verdict(part))
    return verdict


def _redirect_words(redirect: Any) -> list[str]:
    target = redirect.output
    return [redirect.type, target.word if hasattr(target, "word") else str(target)]


def _simple_verdict(node: Any, root: str | None, depth: int) -> tuple[Verdict, str]:
    """One simple command: its words, assignments and redirections, as ``_segment_verdict`` reads them."""
    words: list[str] = []
    verdict: tuple[Verdict, str] = ("allow", "")
    for part in node.parts:
        if part.kind in ("word", "assignment"):
            words.append(part.word)
            verdict = _worst(verdict, _words_verdict(part))
        elif part.kind == "redirect":
            words.extend(_redirect_words(part))
            if hasattr(part.output, "kind"):
                verdict = _worst(verdict, _words_verdict(part.output))
    return _worst(verdict, _segment_verdict(words, root, depth))


def classify_command(command: str, root: str | None = None) -> Verdict:
    """``allow``, ``ask`` or ``deny`` for a shell command line run in the workspace ``root``."""
    return explain_command(command, root=root)[0]


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
