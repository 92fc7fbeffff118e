"""Where the package keeps its defaults, and which ``profiles.yaml`` a run reads.

The shipped ``profiles.yaml`` and its prompts are package data (``subagent_lab/defaults/``), so an
installed package starts without a clone. The configuration a run reads is, in order: the one
named by ``config=`` (``--config``), ``$SUBAGENT_LAB_CONFIG``, ``profiles.yaml`` in the working
directory, else the packaged file. A user's file may start with ``extends: defaults`` to add to or
replace entries of the packaged one (``config.profiles.load_config``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from subagent_lab.core.types import ConfigError

DEFAULTS_DIR = Path(__file__).resolve().parents[1] / "defaults"
"""The packaged ``profiles.yaml`` and ``prompts/``."""
PACKAGED_CONFIG = DEFAULTS_DIR / "profiles.yaml"
CONFIG_ENV = "SUBAGENT_LAB_CONFIG"
RUNS_ENV = "SUBAGENT_LAB_RUNS"
"""Where traces and sweeps go, replacing the configuration's ``trace_dir``."""
EXTENDS_DEFAULTS = "defaults"
"""The one value of a user file's ``extends:``: the packaged ``profiles.yaml``."""


def search_order(cwd: Path | None = None) -> str:
    """The places a configuration is looked for, in order, as one line for error messages."""
    here = (cwd or Path.cwd()) / "profiles.yaml"
    return (
        f"config= (--config), then ${CONFIG_ENV}, then {here} (the working directory), "
        f"then the packaged defaults {PACKAGED_CONFIG}"
    )


def find_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The configuration file to read (see the module docstring); ConfigError, naming every place
    looked at, when the one asked for is not a file."""
    env = os.environ if env is None else env
    if path:
        given, how = Path(path), f"config= {path}"
    elif env.get(CONFIG_ENV):
        given, how = Path(env[CONFIG_ENV]), f"${CONFIG_ENV}={env[CONFIG_ENV]}"
    else:
        local = Path.cwd() / "profiles.yaml"
        given, how = (local, "the working directory") if local.is_file() else (PACKAGED_CONFIG, "")
    given = given.resolve()
    if not given.is_file():
        origin = f"asked for by {how}" if how else "the packaged defaults, missing from this install"
        raise ConfigError(
            f"{given}: no configuration file there ({origin}); a configuration is looked for in "
            f"{search_order()}"
        )
    return given


def prompt_candidates(given: str, config_dir: Path) -> list[Path]:
    """Where a prompt file named ``given`` in a configuration in ``config_dir`` may be: beside
    that file, else among the packaged prompts."""
    path = Path(given)
    if path.is_absolute():
        return [path]
    return list(dict.fromkeys([config_dir / path, DEFAULTS_DIR / path]))
