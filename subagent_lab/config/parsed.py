"""``load_config`` once per process: the runs of a sweep or a study share one parsed configuration.

A parse of ``profiles.yaml`` (YAML, prompt files, validation) costs more CPU than much of a fast
run's own work, and a sweep worker's runs all read the same file. The parsed ``LabConfig`` is kept
while the file (its path, modification time and size) and the environment's model overrides stay
the same; the prompt files it names are read at the parse. Callers must not change it: they copy
it (``model_copy``) to run a variant.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from subagent_lab.config.packaged import find_config
from subagent_lab.config.profiles import LabConfig, load_config

MAX_CONFIGS = 4
"""Configurations kept at once (a worker may serve the runs of a few sweeps)."""
_PARSED: OrderedDict[tuple[object, ...], LabConfig] = OrderedDict()
_LOCK = threading.Lock()


def parsed_config(path: str | Path | None = None) -> LabConfig:
    """``load_config(path)``, parsed once per process per version of the file and environment."""
    where = find_config(path)  # ConfigError naming every place looked at
    try:
        stat = where.stat()
    except OSError:
        return load_config(path)  # the loader says what is wrong with it
    env = tuple(sorted((k, v) for k, v in os.environ.items() if "LLM_" in k or k.startswith("SUBAGENT_LAB")))
    key = (str(where), stat.st_mtime_ns, stat.st_size, env)
    with _LOCK:
        lab = _PARSED.get(key)
        if lab is None:
            lab = _PARSED[key] = load_config(path)
            while len(_PARSED) > MAX_CONFIGS:
                _PARSED.popitem(last=False)
        _PARSED.move_to_end(key)
        return lab
