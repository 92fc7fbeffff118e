"""A concurrent swapper for race tests: a directory or file of the workspace replaced by a symlink
to the same place in a host tree, and back, in a loop."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
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


def race(
    root: Path,
    host: Path,
    level: str,
    call: Callable[[], str],
    canary: str,
    inside: Callable[[str], bool],
    *,
    calls: int = 40,
    race_s: float = 20.0,
) -> int:
    """``call`` under the swapper ``calls`` times at least, and on (up to ``race_s``) until one
    answer came from inside the workspace: on a loaded machine the swapper can hold the link in
    place for every one of the first ``calls``. Asserts that no answer shows ``canary`` (the host
    tree's); returns how many answers came from inside, which the caller asserts is not 0."""
    shown_inside, made, deadline = 0, 0, time.monotonic() + race_s
    with swapper(root, host, level):
        while made < calls or (not shown_inside and time.monotonic() < deadline):
            text = call()
            assert canary not in text, (level, text[:800])
            shown_inside += inside(text)
            made += 1
    return shown_inside
