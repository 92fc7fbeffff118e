"""Run a small sweep with slow scripted models (the victim of the SIGKILL test).

Usage: ``python sweep_worker.py CONFIG OUT_DIR DELAY_S`` (DELAY_S: seconds per model turn).
"""

from __future__ import annotations

import sys
import time

from subagent_lab.core.types import ModelRequest, ModelResponse
from subagent_lab.experiments.sweep import SweepSpec, run_sweep
from subagent_lab.models.scripted import ScriptedFactory, final, tool_call

TASK = "yaml-safe-load"
SPEC = SweepSpec(name="kill", tasks=(TASK,), models=("light", "main"), repeats=4)
ANSWER = {
    "status": "completed",
    "summary": "safe_load is defined in __init__.py and uses SafeLoader.",
    "findings": ["safe_load calls load with SafeLoader"],
    "evidence": ["__init__.py:117-125"],
    "unresolved_questions": [],
}


class Slow:
    """A picklable scripted turn that takes ``delay`` seconds, like a real model would."""

    def __init__(self, response: ModelResponse, delay: float) -> None:
        self.response = response
        self.delay = delay

    def __call__(self, request: ModelRequest) -> ModelResponse:
        time.sleep(self.delay)
        return self.response


def factory(delay: float) -> ScriptedFactory:
    turns = [Slow(tool_call("Grep", pattern="def safe_load"), delay), Slow(final(ANSWER), delay)]
    return ScriptedFactory({"*": turns})  # type: ignore[dict-item]  # callable turns are Turns too


def main(config: str, out_dir: str, delay: float) -> None:
    run_sweep(
        SPEC,
        config_path=config,
        out_dir=out_dir,
        model_factory=factory(delay),
        max_workers=2,
        cache=False,
        progress=False,
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
