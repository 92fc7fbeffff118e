"""The Bash tool's policy layer (``tools.bash`` runs what it allows): ``classify_command`` sorts
a command line into ``allow`` (a small list of read-only commands), ``deny`` (destructive,
networked, privileged or escaping commands, refused with the reason) and ``ask`` (everything
else); ``ask`` follows the agent's ask policy, which denies by default.

The line is parsed with a real shell parser (``bashlex``, a port of bash's own grammar), and every
simple command in it is judged: inside ``{ ...; }``, subshells, ``if``/``while``/``for`` bodies,
functions, pipelines, ``$(...)``, backticks and ``<(...)``, and behind ``exec``, ``command``,
``builtin``, ``eval`` and the wrappers (``env``, ``timeout``, ``watch`` ...), in a shell's ``-c``
script however the shell is invoked (``bash -lc``, parsed again), and after git's global options
(``git -C dir``, ``git -c key=value``); a recursive ``rm`` of a word bash expands later (``$X``,
globs) is refused (``tools.bash_forms`` finds these). What the parser cannot parse (``case``,
``[[ ]]``, ``$((...))``) is refused, never guessed at. It is still syntactic (bash expands the
line after it was checked: ``$x`` may name anything), so it is not the boundary: the sandbox is
(``tools.bash``).
"""

from __future__ import annotations

import os
import re
from typing import Any

from subagent_lab.tools.bash_forms import Verdict, git_command, rm_verdict, shell_script, wrapped_command

MAX_NESTING = 16
"""Levels of commands inside commands (``bash -c`` scripts, wrappers, substitutions) analysed;
deeper ones are refused."""
MAX_SCRIPT_NESTING = 8
"""The level past which a command that hands a script to the parser again (``eval``, a shell's
``-c``, ``watch``, ``env -S``) is refused: each level parses up to the whole line again."""
_SCRIPT_RUNNERS = frozenset({"eval", "watch", "env", "bash", "sh", "zsh", "dash", "ksh"})

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
