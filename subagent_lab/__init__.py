"""subagent_lab: a notebook-first research harness for read-only code-agent sub-agents.

Importing the package has no side effects: no files, no servers, no environment loading.
"""

__version__ = "0.1.0"
