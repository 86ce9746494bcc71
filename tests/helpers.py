"""Compose configs the way `seq2seq-train` does, and import scripts/, for tests."""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from seq2seq.config import register_configs

# A model small enough to train on the toy tasks in seconds on one CPU core.
TINY_TOY = [
    "data=toy_reverse",
    "data.toy_train_size=512",
    "data.toy_valid_size=32",
    "data.toy_test_size=32",
    "data.max_tokens=512",
    "encoder=gru",
    "decoder=gru",
    "attention=additive",
    "encoder.hidden_size=16",
    "decoder.hidden_size=32",
    "model.embed_dim=32",
    "trainer.threads=1",
    "trainer.log_every=1",
    "logging.progress_bar=false",
]


def compose_config(overrides: list[str]) -> DictConfig:
    register_configs()
    with initialize_config_module(config_module="seq2seq.configs", version_base="1.3"):
        return compose(config_name="train", overrides=overrides)


def toy_train_command(tmp_path: Path, run_dir: Path, *overrides: str) -> list[str]:
    """`python -m seq2seq.cli.train` on the tiny toy task, data below tmp_path, in run_dir."""
    return [sys.executable, "-m", "seq2seq.cli.train", *TINY_TOY, f"data.root={tmp_path / 'data'}",
            f"hydra.run.dir={run_dir}", *overrides]  # fmt: skip


def single_thread_env() -> dict[str, str]:
    """This process's environment with OpenMP held to one thread (for training subprocesses)."""
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def run_training_process(command: list[str], **options) -> subprocess.CompletedProcess:
    """Run a training command to its end on one thread; stdout and stderr together, as text."""
    return subprocess.run(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=single_thread_env(),
        timeout=300,
        **options,
    )


SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def script_module(name: str):
    """scripts/<name>.py imported from its file, once (scripts are not a package)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    return sys.modules[name]


# A toy zh-en lexicon: sentences made of its words have known, checkable translations.
LEXICON = {"I": "我", "you": "你", "see": "看", "like": "喜欢", "cats": "猫", "dogs": "狗",
           "tea": "茶", "Tom": "汤姆", "big": "大", "red": "红", "eat": "吃", "rice": "米饭"}  # fmt: skip


def toy_corpus_lines(
    count: int, seed: int, long_every: int = 10, long_words: tuple[int, int] = (20, 24)
) -> list[str]:
    """Lines `English<TAB>Chinese<TAB>attribution` of LEXICON words; every `long_every`-th
    pair is long (`long_words` words), the others have 2-6."""
    rng = random.Random(seed)
    lines = []
    for index in range(count):
        length = rng.randint(*long_words) if index % long_every == 0 else rng.randint(2, 6)
        words = rng.choices(list(LEXICON), k=length)
        lines.append(f"{' '.join(words)}.\t{''.join(LEXICON[w] for w in words)}。\tCC-BY #{index}")
    return lines


def run_main(main, capsys, *argv: object) -> tuple[int, str, str]:
    """A command's exit code, stdout and stderr (a usage error's SystemExit included)."""
    try:
        code = main([str(arg) for arg in argv])
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err
