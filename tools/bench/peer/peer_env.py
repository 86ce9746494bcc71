"""Each peer toolkit's own virtual environment: found and checked, or made.

torch==2.13.0 is installed first (a CPU build where one is at hand; nothing else may choose
torch), then the peer's install steps; the run stops when torch changed on the way, so that
every framework is measured with the same torch.

OpenNMT-py 3.5.1 declares torch<2.3, so it is installed without its dependencies, followed
by those it imports for training and translation (`import onmt` loads every data transform,
spacy's and fasttext's among them); its server (flask, waitress), TensorBoard, CTranslate2
and six are left out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.bench.peer.shared_settings import (
    JOEYNMT_VERSION,
    OPENNMT_VERSION,
    TORCH_VERSION,
    say,
)


@dataclass(frozen=True)
class PeerToolkit:
    """A peer: the module that tells its version, and the pip steps after torch."""

    name: str
    module: str
    version: str
    install_steps: tuple[tuple[str, ...], ...]


TOOLKITS = {
    "joeynmt": PeerToolkit(
        "joeynmt",
        "joeynmt",
        JOEYNMT_VERSION,
        ((f"joeynmt=={JOEYNMT_VERSION}", "importlib_metadata", "sentencepiece==0.2.1"),),
    ),
    "opennmt": PeerToolkit(
        "opennmt",
        "onmt",
        OPENNMT_VERSION,
        (
            ("--no-deps", f"opennmt-py=={OPENNMT_VERSION}"),  # it declares torch<2.3
            (
                "configargparse",
                "pyonmttok>=1.37,<2",
                "pyyaml",
                "sacrebleu",
                "rapidfuzz",
                "pyahocorasick",
                "fasttext-wheel",
                "spacy",
                "numpy",
                "regex",
                "sentencepiece==0.2.1",
            ),
        ),  # fmt: skip
    ),
}


def versions_code(module: str) -> str:
    """Python that prints {"torch": ..., "peer": ...} as JSON."""
    return (
        f"import json, torch, {module}; "
        f"print(json.dumps({{'torch': torch.__version__, 'peer': {module}.__version__}}))"
    )


def peer_versions(python: Path, module: str) -> dict[str, str] | None:
    """torch's and `module`'s versions in the peer environment; None when it cannot import
    them."""
    if not python.is_file():
        return None
    done = subprocess.run(
        [str(python), "-c", versions_code(module)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def ensure_peer(toolkit: PeerToolkit, venv: Path) -> dict[str, str]:
    """The peer environment's versions, after making it when it is missing or incomplete."""
    python = venv / "bin" / "python"
    found = peer_versions(python, toolkit.module)
    if found and found["peer"] == toolkit.version and found["torch"].startswith(TORCH_VERSION):
        say(f"reusing {venv} ({toolkit.name} {found['peer']}, torch {found['torch']})")
        return found
    say(f"making {venv}: torch=={TORCH_VERSION} first, then {toolkit.name} {toolkit.version}")
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, f"torch=={TORCH_VERSION}"], check=True)
    for step in toolkit.install_steps:
        subprocess.run([*pip, *step], check=True)
    found = peer_versions(python, toolkit.module)
    if not found or not found["torch"].startswith(TORCH_VERSION):
        raise SystemExit(f"{venv}: torch is {found and found['torch']}, not {TORCH_VERSION}")
    return found
