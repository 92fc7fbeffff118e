"""Fixtures of the browser tests: a JupyterLab server, Inspect's log viewer (``inspect view``) and
Debian's Chromium driven by Playwright.

Nothing here downloads a browser: Playwright drives ``/usr/bin/chromium`` (Debian's package,
installed by ``scripts/setup.sh``). Without Chromium, Playwright or JupyterLab the tests skip
with the reason, except in CI (``CI=true``), where set-up installs all three and a missing one
fails the tests.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 1900}
"""Tall enough that each widget, even the explorer with a run opened, fits on one screenshot."""
SERVER_START_S = 120.0
"""A cold JupyterLab start on two busy cores takes 20-40 s; this leaves room."""
LAB_SETTINGS = {
    # Keep every cell in the DOM (the default windowing detaches or skips cells out of view).
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    # No news or update toasts over the widgets (and no requests to the internet).
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}
SCRUBBED_ENV = ("SUBAGENT_LAB_CONFIG", "LLM_BASE_URL", "LLM_MODEL_ID", "LLM_API_KEY")
SCRUBBED_ENV += tuple("LIGHT_" + name for name in SCRUBBED_ENV[1:])


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_browser_stack() -> None:
    """Skip (fail in CI, whose set-up installs them) when Chromium, Playwright or JupyterLab is missing."""
    missing = []
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"{CHROMIUM} (Debian package 'chromium'; scripts/setup.sh installs it as root)")
    for module, package in (("playwright", "playwright"), ("jupyterlab", "jupyterlab")):
        if importlib.util.find_spec(module) is None:
            missing.append(f"the Python package {package!r} (pip install -e '.[dev]')")
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if in_ci():
            pytest.fail(f"{reason}; in CI scripts/setup.sh installs them", pytrace=False)
        pytest.skip(reason)


def require_inspect_ai() -> None:
    """Skip (fail in CI, whose set-up installs the ``inspect`` extra) when inspect_ai is missing."""
    if importlib.util.find_spec("inspect_ai") is None:
        reason = "the inspect view test needs inspect_ai (pip install -e '.[inspect]')"
        if in_ci():
            pytest.fail(f"{reason}; in CI scripts/setup.sh installs it", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots and logs go: ``$SUBAGENT_LAB_ARTIFACTS`` or ``tests/browser/artifacts``."""
    where = Path(os.environ.get("SUBAGENT_LAB_ARTIFACTS") or HERE / "artifacts").resolve()
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium (``/usr/bin/chromium``) with a fresh profile, as a Playwright context."""
    require_browser_stack()
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=VIEWPORT,  # type: ignore[arg-type]
        )
        try:
            yield context
        finally:
            context.close()


@dataclass
class JupyterLab:
    """A running JupyterLab server: where it listens, its token, its root directory and log."""

    url: str
    token: str
    root: Path
    log: Path
    process: subprocess.Popen[bytes]

    def lab_url(self, notebook: str) -> str:
        return f"{self.url}/lab/tree/{notebook}?token={self.token}"

    def log_tail(self, chars: int = 6000) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError as exc:
            return f"(no log: {exc})"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(lab: JupyterLab, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(f"{lab.url}/api/status", headers={"Authorization": f"token {lab.token}"})
    while time.monotonic() < deadline:
        if lab.process.poll() is not None:
            pytest.fail(
                f"JupyterLab exited ({lab.process.returncode}) before it was ready:\n{lab.log_tail()}"
            )
        with contextlib.suppress(OSError), urllib.request.urlopen(request, timeout=5) as response:
            if response.status == 200:
                return
        time.sleep(0.5)
    pytest.fail(f"JupyterLab was not ready after {timeout:.0f} s:\n{lab.log_tail()}")


@pytest.fixture(scope="session")
def jupyter_lab(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Iterator[JupyterLab]:
    """A JupyterLab server on a free port with a random token, serving a fresh temporary root.

    Its settings, workspaces, runtime, data and config directories are temporary too, so nothing of the
    developer's own JupyterLab leaks in. Its log is kept as ``jupyterlab.log`` in the artifacts
    directory (and its tail is added to a failing test's report).
    """
    require_browser_stack()
    base = tmp_path_factory.mktemp("jupyterlab")
    root = base / "root"
    root.mkdir()
    settings = base / "settings"
    for plugin, values in LAB_SETTINGS.items():
        target = settings / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env.update(
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTER_DATA_DIR=str(base / "data"),  # the notebook-signing key; labextensions stay in the venv
        IPYTHONDIR=str(base / "ipython"),
        PYTHONUNBUFFERED="1",
    )
    token = secrets.token_hex(16)
    port = _free_port()
    log = artifacts / "jupyterlab.log"
    command = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser",
        f"--IdentityProvider.token={token}",  # ServerApp.token's current name
        f"--port={port}", "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root}", "--ServerApp.terminals_enabled=False",
        # Nothing reaches for the internet: no news feed, no update check, no PyPI extension manager.
        "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        *(["--allow-root"] if os.geteuid() == 0 else []),  # CI containers run as root
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    lab = JupyterLab(url=f"http://127.0.0.1:{port}", token=token, root=root, log=log, process=process)
    try:
        _wait_ready(lab, SERVER_START_S)
        yield lab
    finally:
        _stop(process)


@contextlib.contextmanager
def inspect_view(log_dir: Path, home: Path, log: Path, timeout: float = SERVER_START_S) -> Iterator[str]:
    """``inspect view start`` serving ``log_dir`` on a free loopback port; yields its URL, stops it on exit.

    Its data and cache directories are under ``home``: the viewer keeps a pid file per port there and
    terminates whatever process an old one names, so it never sees the developer's own.
    """
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV and not k.startswith("INSPECT_")}
    env.update(XDG_DATA_HOME=str(home / "data"), XDG_CACHE_HOME=str(home / "cache"), PYTHONUNBUFFERED="1")
    cli = Path(sys.executable).with_name("inspect")
    command = [str(cli), "view", "start", "--log-dir", str(log_dir), "--host", "127.0.0.1", f"--port={port}"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                pytest.fail(f"inspect view exited ({process.returncode}):\n{log.read_text(errors='replace')}")
            with contextlib.suppress(OSError), urllib.request.urlopen(url + "/", timeout=5) as response:
                if response.status == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"inspect view was not ready after {timeout:.0f} s:\n{log.read_text(errors='replace')}"
                )
            time.sleep(0.5)
        yield url
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the server shuts its kernels down), then SIGKILL of its process group if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test that used JupyterLab gets the tail of the server's log in its report."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.failed and "jupyter_lab" in getattr(item, "fixturenames", ()):
        lab = getattr(item, "funcargs", {}).get("jupyter_lab")
        if isinstance(lab, JupyterLab):
            report.sections.append(("JupyterLab log (tail)", lab.log_tail()))
