"""One redactor for everything the harness writes: traces, results, sweep rows, crash reports.

``Redactor`` masks, in any text (plain or JSON-encoded, once or twice):

- the values of environment variables named like a secret (``*_KEY``, ``*_TOKEN``, ``*_SECRET``,
  ``*_PASSWORD``, ``*_PASSWD``, ``*_PWD``, ``*_CREDENTIAL(S)``, ``*_AUTH``, ``API_KEY`` ...);
- extra values it is given, such as every configured model's key (``LabConfig.redactor``),
  whatever its variable is called;
- private-key material in any wrapping: PEM blocks (``-----BEGIN ... PRIVATE KEY-----`` to its
  END line, or to the end of what is left of it when output was cut), SSH2 blocks
  (``---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----``), base64-encoded PEM (a Kubernetes Secret's
  ``tls.key: LS0tLS1CRUdJTi...``) and JSON ``private_key`` values (a service-account file);
- token shapes: the detectors of ``detect-secrets`` (Yelp's maintained scanner; its plugins'
  own regexes: AWS key ids and quoted secret access keys, Azure storage account keys,
  credentials in URLs, SendGrid, Slack tokens and webhooks, Stripe, GitHub, GitLab, npm,
  OpenAI, PyPI, Square OAuth secrets, JWTs) and the harness's own (``sk-``, ``AIza``, ``hf_``,
  ``Bearer`` credentials, unquoted AWS secret keys, OAuth ``client_secret`` values, Google
  ``GOCSPX-`` secrets, Azure ``SharedAccessKey``).

Cost: every shape carries the literal strings one of which any match must contain (its
"needles"); a shape's regex runs only on texts holding a needle (a C-speed substring test), so
an observation without anything secret-like costs a few substring scans, not a regex per shape.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from subagent_lab.core.secret_policy import BASE64_KEY_NEEDLES, BASE64_KEY_PREFIXES

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8
"""Shorter values are not masked: replacing every "true" or "1234" would garble traces."""

SECRET_ENV_NAME = re.compile(
    r"(?i)(api_?key|(^|_)(keys?|auth)($|_)|_pwd$|token|secret|passw|credential)"
)  # fmt: skip
"""Environment variable names whose values are secret (``KEYBOARD``, ``AUTHOR`` or ``PWD`` are not)."""

_ESC = r"\\+[nrt]"
"""A newline written escaped, once or more (JSON text, or JSON inside JSON: a trace's observation)."""
_BODY = r"(?:[A-Za-z0-9+/=:,_ \t.-]|" + _ESC + r"|\r|\n)"
# The body may hold escaped newlines but never ends inside an escape sequence, so a redacted
# JSON line stays valid JSON.
PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:(?!-----END )" + _BODY
    + r")*(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)?"
)  # fmt: skip
SSH2_KEY_BLOCK = re.compile(
    r'---- BEGIN SSH2 [A-Z ]*PRIVATE KEY ----(?:(?!---- END )(?:[A-Za-z-]+: "[^"\n\\]*"|\\+"|'
    + _BODY[3:-1] + r"))*(?:---- END SSH2 [A-Z ]*PRIVATE KEY ----)?"
)  # fmt: skip
_B64_LINE_END = r"(?=\r?\n|\\+n|$|[\"'\s,}])"
BASE64_KEY = re.compile(
    "(?:" + "|".join(BASE64_KEY_PREFIXES) + r")[A-Za-z0-9+/]*={0,2}"
    + r"(?:(?:\r?\n|" + _ESC + r")[ \t]*[A-Za-z0-9+/]{4,}={0,2}" + _B64_LINE_END + ")*"
)  # fmt: skip
_BASE64_CHAR = re.compile(r"[A-Za-z0-9+/]")
JSON_PRIVATE_KEY = re.compile(r'(\\*"private_key\\*"\s*:\s*\\*")((?:[^"\\]|\\+[^"\\]|\\\\)+)')
"""The value of a JSON ``"private_key": "..."`` field (service-account files), escaped or not."""


_SPLIT_CHARS = 200
"""How far into two adjacent list items a token split between them is looked for."""
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_+/=.-]+")
_ITEM_JOIN = re.compile(r'"\s*,\s*"')
_LIST_ITEM = re.compile(r'[A-Za-z0-9_+/=.-][^"\\]*(?:\\.[^"\\]*)*"\s*[,\]]')


def _split_across_items(line: str) -> bool:
    """Whether JSON text ``line`` has two strings side by side in a list with token characters on
    both sides of the boundary (the second followed by ``,`` or ``]``, not by ``:`` as a key is):
    where a token may be split across items."""
    for join in _ITEM_JOIN.finditer(line):
        start = join.start()
        if start and _TOKEN_RUN.match(line, start - 1, start) and _LIST_ITEM.match(line, join.end()):
            return True
    return False


@dataclass(frozen=True)
class Shape:
    """A secret recognised by its shape, and the literals that gate its regex."""

    pattern: re.Pattern[str]
    needles: tuple[str, ...]
    """Any match contains one of these (lower-case when ``folded``): the regex runs only then."""
    folded: bool = False
    group: int = 0
    """0: mask the whole match; n: mask only group n (a URL's password, not its user and host)."""
    source: str = "harness"
    back: re.Pattern[str] | None = None
    """Characters the mask extends over backwards from a match (the start of a base64 blob
    whose key sits at an offset in it); None: the match alone."""

    def mask(self, match: re.Match[str]) -> str:
        if not self.group or match.group(self.group) is None:
            return REDACTED
        start, end = match.start(self.group) - match.start(), match.end(self.group) - match.start()
        whole = match.group(0)
        return whole[:start] + REDACTED + whole[end:]


_HARNESS_SHAPES: tuple[tuple[str, tuple[str, ...], bool, int], ...] = (
    # A token split across adjacent string literals ("ghp_abc" "def", 'AKIA...' + '...'), on one
    # line or continued on the next (a Read's numbered lines, JSON-escaped or not). Bounded.
    (r"(?:gh[pousr]_|github_pat_|(?<![A-Za-z0-9])(?:AKIA|ASIA)(?=[0-9A-Z]))[A-Za-z0-9_]{0,80}"
     r"(?:\\{0,3}[\"'](?:[ \t+(),0-9]|\\{1,3}[nt]|\r?\n){0,40}\\{0,3}[\"'][A-Za-z0-9_\-]{1,80}){1,8}",
     ("ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_", "AKIA", "ASIA"), False, 0),
    # Tokens after an identifier's underscore (``GITHUB_TOKEN_ghp_...``) count: no word boundary
    # before a prefix that is distinctive alone, and only no letter or digit before a short one.
    (r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})", ("ghp_", "gho_", "ghs_", "ghu_", "ghr_",
     "github_pat_"), False, 0),
    (r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{16,}", ("sk-",), False, 0),
    (r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}", ("k_live_", "k_test_"), False, 0),
    (r"\bAIza[0-9A-Za-z_\-]{30,}", ("AIza",), False, 0),
    # GitLab's tokens, routable ones included (``glpat-<base64>.01.<part>``).
    (r"gl(?:pat|dt|rt|ptt|soat|ft|oas|cbt)-[A-Za-z0-9_\-]{16,}(?:\.[A-Za-z0-9_\-]{2,}){0,3}",
     ("glpat-", "gldt-", "glrt-", "glptt-", "glsoat-", "glft-", "gloas-", "glcbt-"), False, 0),
    (r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}", ("hf_",), False, 0),
    (r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{20,}", ("npm_",), False, 0),
    # More services' prefixed tokens: DigitalOcean, Shopify, Docker Hub, Grafana, Google OAuth
    # access tokens, Square, Atlassian, Linear, age keys, PyPI.
    (r"(?<![A-Za-z0-9])(?:do[opr]_v1_|shp(?:at|ss|ca|pa)_|dckr_pat_|glc_|ya29\.|sq0atp-|ATATT|lin_api_"
     r"|AGE-SECRET-KEY-1|pypi-AgE)[A-Za-z0-9_\-=]{20,}",
     ("_v1_", "shp", "_pat_", "glc_", "ya29.", "sq0", "ATATT", "lin_api_", "AGE-SECRET-KEY-", "pypi-AgE"),
     False, 0),
    (r"\b(?:ghp|gho|ghs|ghu|ghr|github_pat|AKIA|ASIA)[A-Za-z0-9_\-]{12,}",
     ("ghp", "gho", "ghs", "ghu", "ghr", "github_pat", "AKIA", "ASIA"), False, 0),
    # Slack: bot, user, app-level (xapp-), configuration and refresh (xoxe-, xoxe.xoxp-) tokens.
    (r"(?<![A-Za-z0-9])(?:xox[a-z](?:\.xox[a-z])?|xapp)-[A-Za-z0-9\-]{8,}", ("xox", "xapp-"), False, 0),
    (r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*", ("eyJ",), False, 0),
    (r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*", ("bearer",), True, 0),
    # An AWS secret access key in an INI or env file (detect-secrets wants it quoted).
    (r"(?i)aws.{0,20}?(?:secret|key).{0,20}?[=:]\s*\\*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
     ("aws",), True, 1),
    # ... and one split across adjacent string literals ("abc" "def", 'abc' + 'def', continued on
    # the next line, JSON-escaped or not): every literal of it is masked. Bounded.
    (r"(?i)aws.{0,20}?(?:secret|key).{0,20}?[=:]\s*\(?\s*(\\{0,3}[\"'][A-Za-z0-9/+]{1,40}\\{0,3}[\"']"
     r"(?:(?:[ \t+(),]|\\{1,3}[nrt]|\\{1,3}\r?\n|\r?\n){0,40}"
     r"\\{0,3}[\"'][A-Za-z0-9/+]{1,40}\\{0,3}[\"']){1,8})",
     ("aws",), True, 1),
    # OAuth client secrets, by their key (any provider) and by Google's shape.
    (r"(?i)client[_-]?secret\\*[\"']?\s*[:=]\s*\\*[\"']?([^\s\"'\\,}]{8,})",
     ("client_secret", "client-secret", "clientsecret"), True, 1),
    (r"\bGOCSPX-[A-Za-z0-9_\-]{20,}", ("GOCSPX-",), False, 0),
    (r"(?i)(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/=]{20,})",
     ("accountkey=", "sharedaccesskey="), True, 1),
    # A password in a URL with a scheme (databases, brokers, proxies): keep the user, mask it.
    # Bounded runs: unbounded ones rescanned a long word at every position (quadratic).
    (r"[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s:/@\"'\\]{0,256}:([^\s@/\"'\\]{1,1024})@", ("://",), False, 1),
)  # fmt: skip
"""The harness's own shapes: ``(regex, needles, folded, group)``."""

_DETECT_SECRETS_NEEDLES: dict[str, tuple[tuple[str, ...], bool]] = {
    "aws.AWSKeyDetector": (("AKIA", "ASIA", "ABIA", "ACCA", "A3T", "aws", "AWS", "Aws"), False),
    "azure_storage_key.AzureStorageKeyDetector": (("AccountKey=",), False),
    "basic_auth.BasicAuthDetector": (("://",), False),
    "sendgrid.SendGridDetector": (("SG.",), False),
    "slack.SlackDetector": (("xox", "XOX", "Xox", "hooks.slack.com"), False),
    "stripe.StripeDetector": (("k_live_",), False),
    "github_token.GitHubTokenDetector": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), False),
    "gitlab_token.GitLabTokenDetector": (
        ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "GR1348941", "glcbt-"), False,
    ),
    "npm.NpmDetector": (("_authToken=",), False),
    "openai.OpenAIDetector": (("T3BlbkFJ",), False),
    "pypi_token.PypiTokenDetector": (("pypi-AgE",), False),
    "square_oauth.SquareOAuthDetector": (("sq0csp-",), False),
    "jwt.JwtTokenDetector": (("eyJ",), False),
}  # fmt: skip
"""The ``detect-secrets`` plugins used (module.class) and the needles of their regexes: each
regex starts with, or requires, one of these literals (``tests/redteam`` checks every plugin's
sample token passes its gate). Entropy and keyword plugins are left out: they flag ordinary code."""


_LINEAR_REWRITES: dict[str, str] = {
    # A `.+` before a literal: retried at every `//`, each retry scanning to the line's end.
    r"\/\/.+\/:_authToken=\s*((npm_.+)|([A-Fa-f0-9-]{36})).*":
        r"/:_authToken=[ \t]*((npm_[^\s\"'\\]*)|([A-Fa-f0-9-]{36}))",  # the token, whatever the registry
    # Retried at every `eyJ` of a long run of its own characters: start only where a run starts.
    r"eyJ[A-Za-z0-9-_=]+\.[A-Za-z0-9-_=]+\.?[A-Za-z0-9-_.+/=]*?":
        r"(?<![A-Za-z0-9_=-])eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+\.?",
    r"sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}":
        r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}",
}  # fmt: skip
"""detect-secrets regexes that are quadratic on hostile text, and the linear form used instead
(the same matches on real tokens; ``tests/redteam/test_round_two.py`` times every shape)."""


@functools.lru_cache(maxsize=1)
def shapes() -> tuple[Shape, ...]:
    """Every shape the redactor masks, in the order applied (key blocks first)."""
    import importlib

    out = [
        Shape(PRIVATE_KEY_BLOCK, ("-----BEGIN ",)),
        Shape(SSH2_KEY_BLOCK, ("---- BEGIN SSH2 ",)),
        Shape(BASE64_KEY, BASE64_KEY_NEEDLES, back=_BASE64_CHAR),
        Shape(JSON_PRIVATE_KEY, ("private_key",), group=2),
    ]
    for pattern, needles, folded, group in _HARNESS_SHAPES:
        out.append(Shape(re.compile(pattern), needles, folded, group))
    for name, (needles, folded) in _DETECT_SECRETS_NEEDLES.items():
        module, cls = name.split(".")
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)
        for plugin_regex in plugin.denylist:
            rewrite = _LINEAR_REWRITES.get(plugin_regex.pattern)
            regex = plugin_regex if rewrite is None else re.compile(rewrite, plugin_regex.flags)
            group = 1 if regex.groups else 0  # the plugin's secret group (a URL's password)
            out.append(Shape(regex, needles, folded, group, source=f"detect-secrets:{module}"))
    return tuple(out)


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable's name marks its value as secret."""
    return SECRET_ENV_NAME.search(name) is not None


def secret_env_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the secret-named variables of ``environ`` (default: this process's)."""
    env = os.environ if environ is None else environ
    return [value for name, value in env.items() if is_secret_env_name(name)]


def mask_shapes(text: str, shape_list: Iterable[Shape] | None = None) -> str:
    """``text`` with every shape masked (no configured values: see ``Redactor``)."""
    listed = shapes() if shape_list is None else tuple(shape_list)
    plain, folded = _default_needles() if shape_list is None else _needles(listed)
    lower = text.lower() if folded else None
    # Most texts hold no needle at all: one pass over every shape's needles settles them.
    if not any(map(text.__contains__, plain)) and (lower is None or not any(map(lower.__contains__, folded))):
        return text
    for shape in listed:
        if shape.folded:
            lower = text.lower() if lower is None else lower
            if not any(map(lower.__contains__, shape.needles)):
                continue
        elif not any(map(text.__contains__, shape.needles)):
            continue
        masked = shape.pattern.sub(shape.mask, text) if shape.back is None else _sub_back(shape, text)
        if masked != text:
            text, lower = masked, None
    return text


@functools.lru_cache(maxsize=1)
def _default_needles() -> tuple[tuple[str, ...], tuple[str, ...]]:
    return _needles(shapes())


def _needles(shape_list: tuple[Shape, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The needles that tell whether any shape of ``shape_list`` can match: (those matched as
    written, those matched lower-case). A needle that holds another is left out: where it occurs,
    so does the other (``ghp_`` and ``ghp``; ``AWS`` and the lower-case ``aws``)."""
    folded = list(dict.fromkeys(n for s in shape_list if s.folded for n in s.needles))
    plain = list(dict.fromkeys(n for s in shape_list if not s.folded for n in s.needles))
    folded = [n for n in folded if not any(m != n and m in n for m in folded)]
    plain = [n for n in plain if not any(m != n and m in n for m in plain)]
    plain = [n for n in plain if not any(f in n.lower() for f in folded)]
    return tuple(plain), tuple(folded)


def _sub_back(shape: Shape, text: str) -> str:
    """``shape.pattern.sub`` with each match's mask extended back over ``shape.back`` characters
    (never into the previous match): linear, each character is stepped over at most once."""
    assert shape.back is not None
    out: list[str] = []
    done = 0
    for match in shape.pattern.finditer(text):
        start = match.start()
        while start > done and shape.back.match(text, start - 1):
            start -= 1
        out.append(text[done:start])
        out.append(REDACTED)
        done = match.end()
    out.append(text[done:])
    return "".join(out)


def mask_url(url: str) -> str:
    """``url`` with the password of a ``user:password@`` part masked (the user stays)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return mask_shapes(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{REDACTED}@{host}"))


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
        self._mask: Callable[[str], str] = mask_shapes

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return self._mask(text)

    def json_line(self, line: str) -> str:
        """``line`` (one JSON document, compact: a trace event, a result) with the strings inside
        it masked, never the serialized text: the line stays valid JSON with the same structure
        (a rule matching across ``","`` would merge list items or break the line).

        A line the text rules leave as it is, with no list-item boundary between two token
        characters (``…AKIA","ODNN…``), comes back as it is, at the cost of one ``__call__`` and
        one scan (the common case); only a line holding something to mask is decoded, masked
        string by string and re-encoded.
        """
        if self(line) == line and not _split_across_items(line):
            return line
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            return self(line)  # not JSON after all: plain text
        return json.dumps(self.data(value), ensure_ascii=False, separators=(",", ":"))

    def _split_items(self, items: list[Any]) -> list[Any]:
        """``items`` with a token split across two adjacent strings (``["AKIAIOSF", "ODNN7EXAMPLE"]``)
        masked in both: the end of one and the start of the next are masked when together they
        are a secret. Each item stays an item."""
        out = list(items)
        for i in range(len(out) - 1):
            first, second = out[i], out[i + 1]
            if not (isinstance(first, str) and isinstance(second, str)):
                continue
            # The run of token characters ending the first item, found forwards in its reversal.
            tail = _TOKEN_RUN.match(first[: -_SPLIT_CHARS - 1 : -1])
            head = _TOKEN_RUN.match(second, 0, _SPLIT_CHARS)
            if tail is None or head is None:
                continue
            joined = tail.group()[::-1] + head.group()
            if self(joined) != joined:
                out[i] = first[: len(first) - tail.end()] + REDACTED
                out[i + 1] = REDACTED + second[head.end() :]
        return out

    def data(self, value: Any) -> Any:
        """A copy of JSON data with every string in it (keys too) masked; iterative, any depth.
        Two keys masked alike stay two keys (``[REDACTED]``, ``[REDACTED] (2)``)."""
        root: list[Any] = [value]
        stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]  # (container, slot, what goes there)
        while stack:
            parent, slot, node = stack.pop()
            if isinstance(node, str):
                copy: Any = self(node)
            elif isinstance(node, dict):
                copy = {}
                for key, child in node.items():
                    name = self(key) if isinstance(key, str) else key
                    base, n = name, 1
                    while name in copy:
                        n += 1
                        name = f"{base} ({n})"
                    copy[name] = child
                    stack.append((copy, name, child))
            elif isinstance(node, list):
                copy = self._split_items(node)
                stack.extend((copy, i, child) for i, child in enumerate(copy))
            else:
                copy = node
            parent[slot] = copy
        return root[0]
