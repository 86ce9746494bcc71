"""JoeyNMT's own virtual environment: found and checked, or made.

torch==2.13.0 is installed first (a CPU build where one is at hand; nothing else may choose
torch), then JoeyNMT and its two companions; the run stops when torch changed on the way,
so that both frameworks are measured with the same torch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tools.bench.peer.shared_settings import PEER_PACKAGES, PEER_VERSION, TORCH_VERSION, say

VERSIONS_CODE = (
    "import json, torch, joeynmt; "
    "print(json.dumps({'torch': torch.__version__, 'joeynmt': joeynmt.__version__}))"
)


def peer_versions(python: Path) -> dict[str, str] | None:
    """torch and joeynmt versions in the peer environment; None when it cannot import them."""
    if not python.is_file():
        return None
    done = subprocess.run(
        [str(python), "-c", VERSIONS_CODE], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def ensure_peer(venv: Path) -> dict[str, str]:
    """The peer environment's versions, after making it when it is missing or incomplete."""
    python = venv / "bin" / "python"
    found = peer_versions(python)
    if found and found["joeynmt"] == PEER_VERSION and found["torch"].startswith(TORCH_VERSION):
        say(f"reusing {venv} (joeynmt {found['joeynmt']}, torch {found['torch']})")
        return found
    say(f"making {venv}: torch=={TORCH_VERSION} first, then {' '.join(PEER_PACKAGES)}")
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, f"torch=={TORCH_VERSION}"], check=True)
    subprocess.run([*pip, *PEER_PACKAGES], check=True)
    found = peer_versions(python)
    if not found or not found["torch"].startswith(TORCH_VERSION):
        raise SystemExit(f"{venv}: torch is {found and found['torch']}, not {TORCH_VERSION}")
    return found
