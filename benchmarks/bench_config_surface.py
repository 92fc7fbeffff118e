"""The scaffold's configuration surface of checkouts, side by side (issue 38).

For each checkout given (the repository's root; its own ``subagent_lab`` is imported in a
subprocess with ``PYTHONPATH`` set to it) it prints:

- ``RuntimeProfile``'s fields, and how many of them are aid switches or observation sizes (the
  flat vocabulary: the 23 aid names and 8 sizes that the one legacy mapper, ``config/legacy.py``,
  still reads);
- the lines of ``profiles.yaml``'s ``scaffolds:`` section (comments and blank lines left out) and
  how many times ``aided``'s eleven settings are written there;
- the package modules that read a flat aid name as a profile field or a dict key (``"cite_margin"``,
  ``profile.cite_margin``, ``f["cite_margin"]``), a policy's own ``name`` and parameters aside.

Usage: python benchmarks/bench_config_surface.py OLD_CHECKOUT [NEW_CHECKOUT ...]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

AIDS = (
    "constrain_paths", "evidence_from_seen", "require_seen", "require_grounded_evidence",
    "finish_after_stale", "finish_after_reads", "read_after_hits", "read_on", "first_search",
    "min_evidence", "cite_anchors", "cite_margin", "cite_units", "max_evidence", "absence_check",
    "task_paths", "show_layout", "min_tool_calls", "symbol_tools", "repo_map_tokens", "tool_guide",
    "retrieval_start", "grace_turn",
)  # fmt: skip
"""The flat aid names (``config/legacy.py: FLAT``), written out so an old checkout is measured too."""
SIZES = (
    "tool_interface", "action_max_tokens", "thought_max_chars", "arg_max_chars", "grep_max_matches",
    "read_window", "glob_max_results", "read_outline",
)  # fmt: skip
AIDED = ("constrain_paths", "evidence_from_seen", "cite_anchors", "absence_check", "task_paths")
"""Settings of ``aided`` that any flat preset writes again (a spec list inherits them)."""

PROBE = """
import json
from subagent_lab.config.profiles import RuntimeProfile
print(json.dumps(sorted(RuntimeProfile.model_fields)))
"""


def profile_fields(root: Path) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    fields: list[str] = json.loads(out.stdout)
    return fields


def preset_lines(root: Path) -> tuple[int, int]:
    """Lines of the ``scaffolds:`` section, and how often ``aided``'s settings are written there."""
    text = (root / "profiles.yaml").read_text(encoding="utf-8")
    section = text.split("\nscaffolds:", 1)[1].split("\n# Parent agents", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    written = sum(1 for ln in lines for aid in AIDED if re.match(rf"\s*{aid}:", ln))
    return len(lines), written


NOT_READS = re.compile(r"^\s*name = |^__all__|CiteFromSeen\.")
"""A policy's own trace name, an export list and a shared parameter's source: not a flat field."""


def flat_readers(root: Path) -> dict[str, int]:
    names = "|".join(AIDS)
    reads = re.compile(rf"(\"({names})\"|profile\.({names})\b|f\[\"({names})\"\])")
    found: dict[str, int] = {}
    for path in sorted((root / "subagent_lab").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        hits = sum(len(reads.findall(ln)) for ln in lines if not NOT_READS.search(ln))
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


def main() -> int:
    roots = [Path(p).resolve() for p in sys.argv[1:]] or [Path(__file__).resolve().parents[1]]
    rows = []
    for root in roots:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        fields = profile_fields(root)
        lines, aided = preset_lines(root)
        readers = flat_readers(root)
        rows.append((commit, fields, lines, aided, readers))
    head = "| checkout | RuntimeProfile fields | aid switches | sizes | preset lines |"
    print(head + " aided settings written | modules reading flat aid names (reads) |")
    print("|---|---|---|---|---|---|---|")
    for commit, fields, lines, aided, readers in rows:
        modules = ", ".join(f"`{m.removeprefix('subagent_lab/')}` {n}" for m, n in readers.items())
        switches, sizes = len(set(fields) & set(AIDS)), len(set(fields) & set(SIZES))
        cells = [f"`{commit}`", len(fields), switches, sizes, lines, aided, f"{len(readers)}: {modules}"]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
