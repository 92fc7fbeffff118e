"""A pids control group per sandboxed command: the process limit that holds for a host uid 0.

``RLIMIT_NPROC`` is counted per host uid, and the kernel exempts uid 0: a harness running as
root (as set-up and CI do) maps the sandbox's uid 65534 onto its own uid 0, so a fork bomb
inside would not be stopped by the rlimit. A pids cgroup counts the processes of its members
whatever their uid. ``PidsGroup`` makes one (cgroup v1's ``pids`` hierarchy, or v2 where the
``pids`` controller is enabled for children of the harness's own group), the launcher enters it
before ``exec``-ing bubblewrap (so every process of the sandbox is born inside), and it is
removed when the command is done. Where no writable pids hierarchy exists, ``create`` returns
None and only the rlimit applies (``BashSandbox.status`` says so).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/pids")
V2_ROOT = Path("/sys/fs/cgroup")
_PREFIX = "subagent-lab-"


def _v2_parent() -> Path | None:
    """The harness's own v2 group, when it can hold children with the pids controller."""
    try:
        line = next(ln for ln in Path("/proc/self/cgroup").read_text().splitlines() if ln.startswith("0::"))
        own = V2_ROOT / line[3:].lstrip("/")
        if "pids" in (own / "cgroup.subtree_control").read_text().split():
            return own
    except (OSError, StopIteration):
        pass
    return None


def parent_dir() -> Path | None:
    """Where this harness can create pids groups (None: nowhere)."""
    if (V1_ROOT / "cgroup.procs").exists() and os.access(V1_ROOT, os.W_OK):
        return V1_ROOT
    return _v2_parent()


class PidsGroup:
    """One transient pids cgroup with ``pids.max = limit``; ``procs`` is the file to join it by."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, limit: int) -> PidsGroup | None:
        """A new group with the limit set, or None where that is not possible here."""
        parent = parent_dir()
        if parent is None:
            return None
        path = parent / f"{_PREFIX}{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir()
        except OSError:
            return None
        try:
            (path / "pids.max").write_text(str(limit))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    @property
    def procs(self) -> str:
        return str(self.path / "cgroup.procs")

    def remove(self, wait_s: float = 5.0) -> None:
        """Remove the group once its last process is gone (the caller has already reaped it)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # still busy: a stale empty group is left, harmless
                time.sleep(0.01)
