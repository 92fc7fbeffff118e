"""One redactor for everything the harness writes: traces, results, sweep rows, crash reports.

``Redactor`` masks, in any text (plain or JSON-encoded):

- the values of environment variables named like a secret (``*_KEY``, ``*_TOKEN``, ``*_SECRET``,
  ``*_PASSWORD``, ``*_PASSWD``, ``*_PWD``, ``*_CREDENTIAL(S)``, ``*_AUTH``, ``API_KEY`` ...);
- extra values it is given, such as every configured model's key (``LabConfig.redactor``),
  whatever its variable is called;
- private-key blocks (``-----BEGIN ... PRIVATE KEY-----`` up to its END line, or to the end of
  what is left of it when output was cut);
- common token shapes: OpenAI/Anthropic ``sk-``, Stripe ``sk_live_``/``rk_live_``, Google
  ``AIza``, GitLab ``glpat-``, Hugging Face ``hf_``, npm ``npm_``, GitHub ``ghp_``/``gho_``/
  ``ghs_``/``ghu_``/``ghr_``/``github_pat_``, Slack ``xox?-``, AWS ``AKIA``/``ASIA``, JWTs and
  ``Bearer`` credentials.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8
"""Shorter values are not masked: replacing every "true" or "1234" would garble traces."""

SECRET_ENV_NAME = re.compile(
    r"(?i)(api_?key|(^|_)(keys?|auth)($|_)|_pwd$|token|secret|passw|credential)"
)  # fmt: skip
"""Environment variable names whose values are secret (``KEYBOARD``, ``AUTHOR`` or ``PWD`` are not)."""

_BODY = r"(?:[A-Za-z0-9+/=:,_ \t.-]|\\[nrt]|\r|\n)"
# The body may hold escaped newlines (JSON text) but never ends inside an escape sequence, so a
# redacted JSON line stays valid JSON.
PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:(?!-----END )" + _BODY
    + r")*(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)?"
)  # fmt: skip
TOKEN_PATTERNS: tuple[re.Pattern[str], ...] = (
    PRIVATE_KEY_BLOCK,
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),
    re.compile(r"\bnpm_[A-Za-z0-9]{20,}"),
    re.compile(r"\b(?:ghp|gho|ghs|ghu|ghr|github_pat|AKIA|ASIA)[A-Za-z0-9_\-]{12,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{8,}"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*"),
)
"""Secrets recognised by their shape, wherever they appear."""


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable's name marks its value as secret."""
    return SECRET_ENV_NAME.search(name) is not None


def secret_env_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the secret-named variables of ``environ`` (default: this process's)."""
    env = os.environ if environ is None else environ
    return [value for name, value in env.items() if is_secret_env_name(name)]


class Redactor:
    """Masks secrets in a string (see the module docstring for what counts).

    Args:
        extra_values: Secret values to mask besides the environment's secret-named variables.
    """

    def __init__(self, extra_values: Iterable[str] | None = None) -> None:
        values = [v for v in [*secret_env_values(), *(extra_values or [])] if len(v) >= MIN_SECRET_CHARS]
        # Redaction runs on JSON text too: a value with quotes, backslashes or control characters
        # is written escaped, so its escaped forms are looked for as well.
        forms = {f for v in values for f in (v, json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1])}
        self._values = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        for pattern in TOKEN_PATTERNS:
            text = pattern.sub(REDACTED, text)
        return text
