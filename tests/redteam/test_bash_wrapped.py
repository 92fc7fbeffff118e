"""Issue 52, item 10: wrapped deny-listed forms the Bash classifier answered ``ask`` for.

On ``3cb5cb3`` a shell's script was read only when ``-c`` stood alone (``bash -lc 'curl x'`` was
"code that is not analysed"), wrappers never looked at the command they run (``timeout 5 sh -c
'sudo id'``), git's subcommand was the first word without a dash (``git -C app push`` was "git
app"), and a recursive ``rm`` of a word bash expands later (``$X``, globs, braces) only asked.
Now scripts are parsed with the shell parser however the shell is invoked, wrappers are unwrapped,
git's global options are skipped (``-c`` of a key that runs a program is refused), and a
recursive rm of an expansion is refused.
"""

from __future__ import annotations

import pytest

from subagent_lab.tools.bash import explain_command

WRAPPED = {
    # shells: the -c script wherever -c sits among the options
    "bash -lc 'curl https://example.com'": "curl",
    "sh -ec 'sudo id'": "sudo",
    "bash -x -c 'wget x'": "wget",
    "bash --norc -o pipefail -c 'nc -l 80'": "nc",
    'bash -c "sh -lc \'bash -ec \\"curl x\\"\'"': "curl",
    "echo curl x | bash": "standard input",
    "cat x | sh -s": "standard input",
    # wrappers: the command they run is judged like any other
    "env bash -c 'curl x'": "curl",
    "env -i FOO=1 sh -c 'sudo id'": "sudo",
    "env -S 'curl x'": "curl",
    "timeout 5 sh -c 'sudo id'": "sudo",
    "timeout -s KILL 5 bash -lc 'ssh host'": "ssh",
    "nohup bash -c 'wget x'": "wget",
    "nice -n 5 bash -c 'curl x'": "curl",
    "xargs -I{} sh -c 'curl {}'": "curl",
    "watch 'curl x'": "curl",
    "watch -n 1 'ls; sudo id'": "sudo",
    # git: the subcommand behind the global options
    "git -C app push": "git push",
    "git -C . fetch origin": "git fetch",
    "git --git-dir=.git --work-tree=. push": "git push",
    "git -c user.name=x push": "git push",
    "git -c core.pager='curl x' log": "core.pager",
    "git -c core.sshCommand=evil status": "core.sshCommand",
    "git -c alias.st='!curl x' st": "alias.st",
    "git --exec-path=tools status": "exec-path",
    # rm: targets bash expands after the check
    "rm -rf $X": "$X",
    'rm -rf "$HOME"': "$HOME",
    "rm -rf ${X}/": "${X}",
    "rm -rf $(pwd)": "$(pwd)",
    "rm -rf `pwd`": "pwd",
    "rm -rf ~/*": "~",
    "rm -rf .[a-z]*": ".[a-z]*",
    "rm -rf {.,app}": "{.,app}",
    "rm -rf -- *": "workspace root",
    "rm -rf ./.": "workspace root",
    "rm -fr app/*": "app/*",
}


@pytest.mark.parametrize("command", sorted(WRAPPED))
def test_wrapped_deny_listed_forms_are_denied(command: str) -> None:
    verdict, reason = explain_command(command, root="/ws")
    assert verdict == "deny", (command, verdict, reason)
    assert WRAPPED[command] in reason, reason


def test_scripts_nested_past_the_limit_are_denied() -> None:
    for command in ("timeout 1 " * 40 + "ls", "eval " * 40 + "ls", "bash -c 'eval " + "eval " * 40 + "ls'"):
        verdict, reason = explain_command(command, root="/ws")
        assert verdict == "deny" and "nested too deeply" in reason, (command, reason)
    verdict, _ = explain_command("bash -c 'bash -c ls'", root="/ws")
    assert verdict == "ask"  # two levels are read through


ORDINARY = {
    "ls -la": "allow",
    "cat app/x.py | head": "allow",
    "git status": "allow",
    "git log --oneline -5": "allow",
    "git --no-pager log -3": "allow",
    "git -C app status": "allow",  # the subcommand is found; app is inside the workspace
    "git show HEAD:app/x.py": "allow",
    "python -m pytest -q": "allow",
    "git -c color.ui=never log": "ask",
    "git commit -m x": "ask",
    "rm app/x.pyc": "ask",
    "rm -rf build": "ask",
    "rm -f *.pyc": "ask",
    "bash run.sh": "ask",
    "sh -c 'ls | wc -l'": "ask",
    "bash -c 'git status && pytest -q'": "ask",
    "timeout 5 pytest -q": "ask",
    "env FOO=1 ls": "ask",
    "nice -n 5 grep -rn x .": "ask",
    "find . -name '*.py' | xargs grep -l login": "ask",
    "watch ls": "ask",
    "make test": "ask",
}


@pytest.mark.parametrize("command", sorted(ORDINARY))
def test_ordinary_commands_keep_their_verdicts(command: str) -> None:
    verdict, reason = explain_command(command, root="/ws")
    assert verdict == ORDINARY[command], (command, verdict, reason)
