"""Where a wrapped command line keeps the command it runs, for the Bash classifier (``tools.bash_policy``).

A shell's ``-c`` script (``bash -lc '...'``, ``sh -ec "..."``), the command behind a wrapper
(``env``, ``timeout 5``, ``nice -n 5``, ``xargs -I{}``, ``watch``'s joined words), git's
subcommand behind its global options (``git -C dir``, ``git -c key=value``), and the targets of an
``rm`` that bash expands after the check (``$X``, ``~``, globs, braces). The classifier judges what
these return as it judges any command; what cannot be read is reported as such, and refused.
"""

from __future__ import annotations

import posixpath
import re
from typing import Literal

Verdict = Literal["allow", "ask", "deny"]

SHELL_OPTION_ARGS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
"""Shell options that take the next word as their value (not the script)."""
_WRAPPER_OPTION_ARGS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "stdbuf": frozenset({"-i", "--input", "-o", "--output", "-e", "--error"}),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "xargs": frozenset({"-a", "--arg-file", "-d", "--delimiter", "-E", "-e", "--eof", "-I", "-i",
                        "--replace", "-L", "-l", "--max-lines", "-n", "--max-args", "-P", "--max-procs",
                        "-s", "--max-chars", "--process-slot-var"}),
    "watch": frozenset({"-n", "--interval", "-d", "--differences", "-q", "--equexit"}),
    "nohup": frozenset(),
}  # fmt: skip
"""Per wrapper, its options that take the next word as their value."""
_GIT_OPTION_ARGS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                              "--super-prefix", "--list-cmds", "--attr-source"})  # fmt: skip
"""git's global options that take the next word as their value."""
_GIT_RUNS_PROGRAM = re.compile(
    r"(?i)^(core\.(pager|editor|sshcommand|fsmonitor|hookspath|askpass|gitproxy|alternaterefscommand)"
    r"|alias\.|pager\.|diff\.|difftool\.|merge\.|mergetool\.|filter\.|credential|gpg\.|sequence\.editor"
    r"|uploadpack\.|receive\.|http\.|https\.|url\.|remote\.|protocol\.|include|ssh\.|init\.templatedir)"
)
"""Configuration keys whose value git runs as a program or that make it reach out (``-c`` of one
is refused: ``git -c core.pager='curl x' log``)."""
_EXPANDS = re.compile(r"[$`*?\[{~]")
"""Characters after which bash changes a word before ``rm`` sees it (variables, substitutions,
globs, braces, home directories): the checked word is not the target."""


def _options_end(args: list[str], takes_value: frozenset[str]) -> int:
    """The index of the first word of ``args`` that is no option (or an option's value)."""
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            return index + 1
        if not word.startswith("-") or word == "-":
            return index
        index += 2 if word in takes_value else 1
    return index


def shell_script(rest: list[str]) -> tuple[Literal["script", "file", "stdin"], str]:
    """How a shell invoked with ``rest`` gets its code: a ``-c`` script (its text), a file (its
    name), or standard input ("")."""
    index, command = 0, False
    while index < len(rest):
        word = rest[index]
        if word == "--":
            index += 1
            break
        if word in SHELL_OPTION_ARGS:
            index += 2
            continue
        if word.startswith(("-", "+")) and word not in ("-", "+"):
            command = command or (not word.startswith("--") and "c" in word[1:])
            index += 1
            continue
        break
    if index >= len(rest):
        return "stdin", ""
    return ("script" if command else "file"), rest[index]


def wrapped_command(name: str, rest: list[str]) -> tuple[list[str], str | None]:
    """(the command words ``name`` runs, or the command line it hands to a shell) for a wrapper.

    ``watch`` and ``env -S`` hand their words to a shell as one line: that line comes second.
    """
    takes = _WRAPPER_OPTION_ARGS.get(name, frozenset())
    args = list(rest)
    if name == "env":
        split = next((i for i, w in enumerate(args) if w in ("-S", "--split-string") or
                      w.startswith(("-S", "--split-string="))), None)  # fmt: skip
        if split is not None:
            word = args[split]
            line = args[split + 1] if word in ("-S", "--split-string") and split + 1 < len(args) else (
                word.partition("=")[2] if word.startswith("--") else word[2:])  # fmt: skip
            tail = args[split + 2 :] if word in ("-S", "--split-string") else args[split + 1 :]
            return [], " ".join([line, *tail])
    index = _options_end(args, takes)
    if name == "env":
        while index < len(args) and re.match(r"^[A-Za-z_]\w*=", args[index]):
            index += 1
    if name == "timeout" and index < len(args):
        index += 1  # the duration
    if name == "nice" and index < len(args) and re.fullmatch(r"-?\d+", args[index]):
        index += 1
    words = args[index:]
    if name == "watch":
        return [], " ".join(words) if words else None
    return words, None


def git_command(rest: list[str]) -> tuple[str, tuple[Verdict, str]]:
    """(git's subcommand, the verdict its global options earn) for ``git`` with ``rest``.

    The paths of ``-C dir``, ``--git-dir`` and ``--work-tree`` are judged like every word; ``-c
    key=value`` of a key that makes git run a program is refused, any other ``-c`` asks.
    """
    verdict: tuple[Verdict, str] = ("allow", "")
    index = 0
    while index < len(rest):
        word = rest[index]
        if not word.startswith("-"):
            return word, verdict
        flag, equals, inline = word.partition("=")
        attached = flag.startswith("-c") and not flag.startswith("--") and len(flag) > 2  # -ckey=value
        if flag in ("-c", "--config-env") or attached:
            following = rest[index + 1] if index + 1 < len(rest) else ""
            setting = word[2:] if attached else inline if equals else following
            key = setting.partition("=")[0]
            if _GIT_RUNS_PROGRAM.match(key):
                return "", ("deny", f"git -c {key} can make git run a program")
            if verdict[0] == "allow":
                verdict = ("ask", f"git -c {key} changes git's configuration")
        elif flag == "--exec-path" and equals:
            return "", ("deny", "git --exec-path runs git commands from another directory")
        index += 2 if flag in _GIT_OPTION_ARGS and not equals and not attached else 1
    return "", verdict


def rm_verdict(rest: list[str]) -> tuple[Verdict, str]:
    """``rm``'s verdict: refused for the workspace root (however written) and, when recursive, for
    any target bash expands after the check; otherwise it asks."""
    flags = [a for a in rest if re.match(r"^-[a-zA-Z]+$", a)]
    recursive = "--recursive" in rest or any("r" in a.lower() for a in flags)
    end = rest.index("--") if "--" in rest else len(rest)
    targets = [a for a in rest[:end] if not a.startswith("-")] + rest[end + 1 :]
    if recursive and not targets:
        return "deny", "recursive rm of the workspace root is not allowed"
    for target in targets:
        if posixpath.normpath(target) in (".", "/", "//") or target.rstrip("/") in ("*", ".*", "./*"):
            return "deny", "recursive rm of the workspace root is not allowed"
        if recursive and _EXPANDS.search(target):
            return "deny", f"recursive rm of {target!r}: bash expands it after the check, to anything"
    return "ask", "rm deletes files"
