"""Screenshot a run's TensorBoard page with headless Chromium (`scripts/tensorboard_screenshot.py`).

Starts `tensorboard --logdir RUN --host 127.0.0.1` on a free loopback port (nothing is
served beyond this machine), waits until it answers, lets headless Chromium render the
page (`#images` by default) into a PNG, and stops TensorBoard. Chromium gets the bundled
Noto CJK font through a private fontconfig file, so the Chinese tag names are legible even
where the system has no CJK font. Needs Chromium (Debian: `apt-get install chromium`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from seq2seq.visualise.fonts import cjk_font_path

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_tensorboard(logdir: Path, port: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir)]
    command += ["--port", str(port), "--host", "127.0.0.1"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_until_serving(url: str, server: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"tensorboard exited with code {server.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.5)
    raise TimeoutError(f"tensorboard did not answer at {url} within {timeout:.0f} s")


def fontconfig_with_cjk(folder: Path) -> Path:
    """A fontconfig file: the system's fonts plus the bundled Noto CJK, so that Chromium
    also draws the Chinese image tags of TensorBoard's own page on a machine without CJK
    system fonts."""
    config = folder / "fonts.conf"
    config.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n'
        '  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>\n'
        f"  <dir>{cjk_font_path().parent}</dir>\n"
        f"  <cachedir>{folder / 'fontconfig-cache'}</cachedir>\n</fontconfig>\n",
        encoding="utf-8",
    )
    return config


def screenshot(chromium: str, url: str, out: Path, size: str, budget_ms: int) -> None:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        fonts = fontconfig_with_cjk(Path(profile))
        command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}/user-data"]
        command += [f"--window-size={size}", f"--virtual-time-budget={budget_ms}"]
        command += [f"--screenshot={out.resolve()}", url]
        environment = {**os.environ, "FONTCONFIG_FILE": str(fonts)}
        subprocess.run(command, check=True, timeout=120, capture_output=True, env=environment)
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot to {out}")


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def screenshot_run(
    run: Path, out: Path, chromium: str, page: str = "images", port: int = 0,
    size: str = "1600,1400", budget_ms: int = 15000,
) -> None:  # fmt: skip
    """TensorBoard on `run` (port 0: any free one), its `#page` rendered into `out`."""
    port = port or free_port()
    server = start_tensorboard(run, port)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}/", server, timeout=60)
        screenshot(chromium, f"http://127.0.0.1:{port}/#{page}", out, size, budget_ms)
    finally:
        stop(server)
