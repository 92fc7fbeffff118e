"""llama-cpp-python's OpenAI-compatible server, keeping every configured model loaded.

Stock llama-cpp-python 0.3.16 holds one model at a time: switching alias reloads the weights and
loses the KV cache (measured: alternating light/main requests took 3.0-3.2 s instead of 2.0 s).
Run as ``python -m subagent_lab.llama_server --config_file F`` (the same CLI as
``python -m llama_cpp.server``). It relies on internals of the pinned llama-cpp-python version.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

PARENT_ENV = "SUBAGENT_LAB_SERVER_PARENT"
"""When set to a pid, the server stops itself once that process is gone (atexit cannot run on SIGKILL)."""


def main() -> None:
    """Run llama-cpp-python's server (same CLI) keeping every configured model loaded."""
    import llama_cpp.server.__main__ as llama_main
    import llama_cpp.server.app as llama_app
    from llama_cpp.server.model import LlamaProxy

    class ResidentLlamaProxy(LlamaProxy):
        """Loads every model once at start; requests pick one by alias without reloading."""

        def __init__(self, models: list[Any]) -> None:
            super().__init__(models)
            self._resident = {self._default_model_alias: self._current_model}
            for alias, settings in self._model_settings_dict.items():
                if alias not in self._resident:
                    self._resident[alias] = self.load_llama_from_model_settings(settings)

        def __call__(self, model: str | None = None) -> Any:
            alias = model if model in self._resident else self._default_model_alias
            return self._resident[alias]

        def free(self) -> None:
            for llama in self._resident.values():
                if llama is not None:
                    llama.close()
            self._resident.clear()

    # set_llama_proxy() looks the class up in the app module's globals at start-up.
    llama_app.LlamaProxy = ResidentLlamaProxy  # type: ignore[misc]
    parent = os.environ.get(PARENT_ENV)
    if parent:
        threading.Thread(target=exit_with_parent, args=(int(parent),), daemon=True).start()
    llama_main.main()


def exit_with_parent(parent: int) -> None:
    """Stop this server gracefully (SIGTERM to itself) once process ``parent`` is gone."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    main()
