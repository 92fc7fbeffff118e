"""The secret policy: which files no tool shows, by name and by content.

Names (``is_secret_name``): ``.env`` and friends, keys and certificates, credential stores
(cloud CLIs, gh, vault, kubeconfig, database and S3 clients, package registries), everything in
a secret directory (``.ssh``, ``.aws``, ``.gnupg`` ...), and the backup or editor copies of any
of them. A backup suffix (``.bak``, ``.orig``, ``.old``, ``~``, ``#...#``, vim swap files ...)
makes a file secret only when the name without it is secret: ``settings.py.bak`` stays
readable, ``.env.bak``, ``#.env#`` and ``server.pem~`` do not. Making every ``*.bak`` secret
would hide ordinary backups that the agent may legitimately need to compare.

Content (``holds_private_key``): a file holding a private-key block (PEM, OpenSSH, PGP) or a
PuTTY key is secret whatever its name.

Read, Grep, Glob, evidence grounding and the main agent's scratch copy all apply this policy
(through ``Workspace`` in ``subagent_lab.workspace.sandbox``).
"""

from __future__ import annotations

import base64
import fnmatch
import functools
import os
import re
import stat
from pathlib import Path

SECRET_DIRS: frozenset[str] = frozenset(
    {".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker", ".password-store"}
)
"""Directories whose whole content counts as secret."""

SECRET_NAME_GLOBS: tuple[str, ...] = (
    ".env", ".env.*", ".env_*", ".env-*", ".envrc", "*.env", "*.pem", "*.key", "*.p12", "*.pfx",
    "*.jks", "*.keystore", "*.kdbx", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", "_netrc",
    ".pgpass", ".my.cnf", ".s3cfg", ".boto", ".vault-token", "*.ppk", ".terraformrc", "terraform.rc",
    "kubeconfig", "kubeconfig.*", "*.kubeconfig", ".kubeconfig", "application_default_credentials.json",
    "access_tokens.db", "legacy_credentials",
    ".npmrc", ".pypirc", ".git-credentials", ".htpasswd", ".dockercfg", "credentials*",
    "*.tfstate", "*.tfstate.*", "*.p8", "credentials.tfrc.json", "settings-security.xml", "rclone.conf",
    ".bash_history", ".zsh_history", ".sh_history", ".psql_history", ".mysql_history", ".python_history",
    ".rediscli_history", ".sqlite_history", ".node_repl_history", ".lesshst", ".viminfo",
    # issue 39: Kubernetes image-pull secrets, secrets files of SOPS/Helm/Rails/Ansible style
    ".dockerconfigjson", "dockerconfigjson", "secrets.yaml", "secrets.yml", "secrets.json", "secrets.toml",
    "secrets.*.yaml", "secrets.*.yml", "secrets.*.json", "secret.yaml", "secret.yml", "secret.json",
    "*.secrets.yaml", "*.secrets.yml", "*.secrets.json", "master.key", "credentials.yml.enc", "vault.yml",
    ".yarnrc.yml", "auth.json", ".htdigest", "keyring.cfg",
)  # fmt: skip
"""File-name patterns (matched case-insensitively on the last component) that count as secret."""

SECRET_PATH_RUNS: tuple[tuple[str, ...], ...] = (
    (".config", "gh", "hosts.yml"), (".config", "gcloud"), (".config", "hub"), (".config", "op"),
    (".cargo", "credentials"), (".cargo", "credentials.toml"), (".gem", "credentials"),
    (".m2", "settings.xml"), (".terraform.d",), (".config", "rclone"), (".config", "gh"),
    (".local", "share", "keyrings"), (".mozilla",), (".config", "google-chrome"), (".config", "chromium"),
    # issue 39: a remote URL with a token (https://x-access-token:ghs_...@github.com/...) and the
    # stores git keeps credentials in; the rest of .git is not secret.
    (".git", "config"), (".git", "credentials"), (".git", "modules"),
    (".gradle", "gradle.properties"), (".nuget", "nuget", "nuget.config"), (".config", "pip", "pip.conf"),
    (".config", "containers", "auth.json"), (".config", "helm", "repositories.yaml"),
)  # fmt: skip
"""Runs of path components (case-insensitive) that are secret wherever they occur; a run that
names a directory covers everything below it (gh tokens, gcloud and 1Password stores)."""
_RUN_HEADS = frozenset(run[0] for run in SECRET_PATH_RUNS)

_BACKUP = re.compile(
    r"^#(?P<autosave>.+)#$|^\.(?P<swap>.+)\.sw[a-p]$|^(?P<base>.+?)"
    r"(?:~|\.~\d+~|\.(?:bak|orig|old|save|sav|backup|tmp|rej|swp|copy)\d*)$",
    re.IGNORECASE,
)
"""Backup and editor copies: ``#x#``, ``.x.swp``, ``x~``, ``x.~1~``, ``x.bak``, ``x.orig`` ..."""


def _base64_prefixes(header: str) -> tuple[str, ...]:
    """The base64 text any encoding of ``header`` contains, at each of the 3 byte alignments.

    A header at a byte offset ``k`` of the encoded data (a service-account JSON whose
    ``private_key`` sits 200 bytes in, base64-encoded whole) shows in the base64 text as the
    encoding of ``k mod 3`` unknown bytes followed by the header: the characters that depend only
    on the header's bytes are kept, those mixing in an unknown byte (before or after) are not.
    """
    data = header.encode()
    out: list[str] = []
    for shift in range(3):
        padded = b"\0" * shift + data
        whole = len(padded) // 3 * 3
        text = base64.b64encode(padded[:whole]).decode()
        out.append(text[(0, 2, 3)[shift] :])  # 1 unknown byte taints 2 characters, 2 taint 3
    return tuple(out)


_KEY_HEADERS = (
    "-----BEGIN PRIVATE KEY", "-----BEGIN RSA PRIVATE KEY", "-----BEGIN EC PRIVATE KEY",
    "-----BEGIN DSA PRIVATE KEY", "-----BEGIN OPENSSH PRIVATE KEY", "-----BEGIN ENCRYPTED PRIVATE KEY",
    "-----BEGIN PGP PRIVATE KEY BLOCK", "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY",
)  # fmt: skip
BASE64_KEY_PREFIXES: tuple[str, ...] = tuple(p for h in _KEY_HEADERS for p in _base64_prefixes(h))
"""How base64-encoded private keys look, at any of the 3 alignments (a Kubernetes Secret's
``tls.key: LS0tLS1CRUdJTi...``, or a whole service-account JSON base64-encoded)."""
BASE64_KEY_NEEDLES: tuple[str, ...] = tuple(sorted({p[:6] for p in BASE64_KEY_PREFIXES}))
"""Six-character heads of ``BASE64_KEY_PREFIXES``: any base64-encoded key contains one."""

PRIVATE_KEY_MARKER = re.compile(
    rb"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d"
    rb"|---- BEGIN SSH2 [A-Z ]{0,40}PRIVATE KEY ----|" + "|".join(BASE64_KEY_PREFIXES).encode()
)
"""Content that makes any file secret: a PEM/OpenSSH/PGP/SSH2 private-key block, the same
base64-encoded (YAML and Kubernetes Secrets), or a PuTTY key."""
CONTENT_SCAN_LIMIT = 64 * 1024 * 1024
"""Bytes of a file searched for a private key (Read cannot scan further in one call either)."""


@functools.lru_cache(maxsize=1)
def _secret_name_regex() -> re.Pattern[str]:
    # One alternation instead of a loop over fnmatch calls: Glob checks every entry it walks.
    return re.compile("|".join(fnmatch.translate(p) for p in SECRET_NAME_GLOBS))


def _undecorated(name: str) -> str | None:
    """The name a backup or editor copy was made of (``.env`` for ``.env~``), or None."""
    match = _BACKUP.match(name)
    if match is None:
        return None
    base = match["autosave"] or match["swap"] or match["base"]
    return base if base and base != name else None


def _in_secret_place(parts: list[str]) -> bool:
    """A secret directory or a secret run of components anywhere in the (lower-cased) path."""
    if any(part in SECRET_DIRS for part in parts):
        return True
    if _RUN_HEADS.intersection(parts):  # rarely true: Glob calls this for every entry it walks
        for run in SECRET_PATH_RUNS:
            for start in range(len(parts) - len(run) + 1):
                if tuple(parts[start : start + len(run)]) == run:
                    return True
    return False


def is_secret_dir(rel: str) -> bool:
    """Whether a relative directory path is secret as a whole (``.ssh``, ``.config/gcloud`` ...).

    Name patterns such as ``credentials*`` are for files: a ``credentials/`` package is not secret.
    """
    return _in_secret_place([part.lower() for part in _parts(rel)])


@functools.lru_cache(maxsize=65_536)
def is_secret_name(rel: str) -> bool:
    """Whether a relative path names a secret by the name policy (see the module docstring).

    Cached: a directory Grep asks it for every file it lists, and a run searches one tree often."""
    parts = [part.lower() for part in _parts(rel)]
    if not parts:
        return False
    if _in_secret_place(parts):
        return True
    name: str | None = parts[-1]
    for _ in range(4):  # ".env.bak~" is a copy of a copy
        if name is None:
            return False
        if _secret_name_regex().match(name) is not None:
            return True
        name = _undecorated(name)
    return False


def holds_private_key(path: str | Path) -> bool:
    """Whether the regular file at ``path`` holds a private-key block in its first 64 MB.

    Never blocks (a FIFO is not opened for reading) and never follows a final symlink; an
    unreadable file holds nothing that could be shown.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        return holds_private_key_fd(fd)
    finally:
        os.close(fd)


def holds_private_key_fd(fd: int) -> bool:
    """``holds_private_key`` for an open descriptor (read with ``pread``: its offset is kept)."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        tail, scanned = b"", 0
        while scanned < CONTENT_SCAN_LIMIT:
            chunk = os.pread(fd, 1024 * 1024, scanned)
            if not chunk:
                return False
            if PRIVATE_KEY_MARKER.search(tail + chunk):
                return True
            tail, scanned = chunk[-80:], scanned + len(chunk)  # a marker split across chunks
    except OSError:
        return False
    return False


def is_secret_file(root: Path, given: str, real: Path) -> bool:
    """Whether ``given`` (as the model wrote it; ``real`` once resolved under ``root``) is secret."""
    if is_secret_name(given) or is_secret_name(os.path.relpath(real, root)):
        return True
    return os.path.isfile(real) and holds_private_key(real)


def _parts(rel: str) -> list[str]:
    # Plain string splitting: pathlib parsing dominated the cost of walking 100k entries.
    return [part for part in rel.replace(os.sep, "/").split("/") if part not in ("", ".")]
