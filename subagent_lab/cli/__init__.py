"""The ``subagent-lab`` command line: ``main`` is the console entry point."""

from subagent_lab.cli.main import main

__all__ = ["main"]
