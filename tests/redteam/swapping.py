"""A concurrent swapper for race tests: a directory or file of the workspace replaced by a symlink
to the same place in a host tree, and back, in a loop."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def swapper(root: Path, host: Path, level: str) -> Iterator[None]:
    """Swap ``root/level`` for a link to ``host/level`` and back until the block ends."""
    stop = threading.Event()
    place, real, link = root / level, root / (level + ".real"), root / (level + ".link")

    def run() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                os.rename(place, real)
                os.symlink(host / level, link)
                os.rename(link, place)
                stop.wait(0.0005)
                os.unlink(place)
                os.rename(real, place)
                stop.wait(0.0005)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)
        if place.is_symlink() or not place.exists():
            with contextlib.suppress(OSError):
                os.unlink(place)
            with contextlib.suppress(OSError):
                os.rename(real, place)
