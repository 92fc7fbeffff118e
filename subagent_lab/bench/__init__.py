"""The explore benchmark: tasks over pinned third-party sources and scoring of answers.

``suite`` loads and checks the tasks (``tasks.yaml``); ``scoring`` scores one
``ExploreResult`` against one task.
"""

from subagent_lab.bench.scoring import Score, score_run
from subagent_lab.bench.suite import BenchTask, GoldSpan, check_gold, load_suite, package_root

__all__ = ["BenchTask", "GoldSpan", "Score", "check_gold", "load_suite", "package_root", "score_run"]
