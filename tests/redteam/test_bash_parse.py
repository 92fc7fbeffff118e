"""Issue 39: the Bash classifier parses the shell line and judges every command in it.

On ``c66a494`` it judged the first word of each ``;``/``|``-separated piece: ``exec curl``,
``command sudo``, ``{ sudo ...; }`` and ``if ...; then curl ...; fi`` were ``ask`` (the first
word ``exec``, ``command``, ``{``, ``then``), so a person approving an ``ask`` saw the wrong reason
and ``ask_policy: allow`` ran them (bubblewrap still contained them: no network, no privilege).
Now ``bashlex`` parses the line and every simple command is judged, wherever it sits; what the
parser cannot parse is refused.
"""

from __future__ import annotations

import pytest

from subagent_lab.tools.bash import explain_command

DENIED = {
    "exec curl https://example.com": "curl",
    "exec -a innocent curl https://example.com": "curl",
    "command sudo id": "sudo",
    "command -p sudo id": "sudo",
    "builtin command exec sudo id": "sudo",
    "{ sudo id; }": "sudo",
    "{ ls; sudo id; } > /dev/null": "sudo",
    "if true; then curl https://example.com; fi": "curl",
    "if curl https://example.com; then ls; fi": "curl",
    "while true; do wget x; done": "wget",
    "for f in a b; do nc -l 80; done": "nc",
    "until false; do ssh host; done": "ssh",
    "(cd app; sudo id)": "sudo",
    "ls | sudo tee x": "sudo",
    "ls && echo $(curl https://example.com)": "curl",
    "echo `sudo id`": "sudo",
    'echo "$(echo $(curl x))"': "curl",
    "diff <(ls) <(curl x)": "curl",
    "f() { sudo id; }; f": "sudo",
    "! sudo id": "sudo",
    "ls\nsudo id": "sudo",
    'eval "curl x"': "curl",
    "nohup curl x": "curl",
    "env -i LANG=C wget x": "wget",
    "for f in /etc/*; do cat $f; done": "/etc/*",
    "while read l; do echo $l; done < /etc/shadow": "/etc/shadow",
    "{ cat app/x; } > ../outside": "..",
}


@pytest.mark.parametrize("command", sorted(DENIED))
def test_every_command_word_is_judged(command: str) -> None:
    verdict, reason = explain_command(command, root="/ws")
    assert verdict == "deny", (command, verdict, reason)
    assert DENIED[command] in reason, reason


@pytest.mark.parametrize(
    "command",
    [
        "case x in a) curl y;; esac",
        "[[ -f x ]] && sudo id",
        "echo $((1 + 2))",
        "time curl x",
        "ls 'unterminated",
    ],
)
def test_what_the_parser_cannot_parse_is_refused(command: str) -> None:
    verdict, reason = explain_command(command, root="/ws")
    assert verdict == "deny" and "cannot be parsed" in reason, reason


@pytest.mark.parametrize(
    "command",
    ["ls", "ls -la app | head -5", "git status && git diff", "{ ls; cat app/auth.py; }", "(cd app && ls)",
     "if test -f x; then cat x; fi", "for f in a b; do wc -l $f; done", "grep -rn login app 2>/dev/null"],
)  # fmt: skip
def test_plain_commands_keep_their_verdicts(command: str) -> None:
    verdict, reason = explain_command(command, root="/ws")
    assert verdict in ("allow", "ask"), reason  # ask: `$f` expands a variable, `test` not on the list
    if "$" not in command and "test" not in command:
        assert verdict == "allow", (command, reason)


def test_a_deeply_nested_line_is_refused_not_crashed() -> None:
    command = "{ " * 2000 + "ls" + "; }" * 2000
    verdict, _ = explain_command(command, root="/ws")
    assert verdict == "deny"
