"""Compose configs the way `seq2seq-train` does, for tests."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module
from omegaconf import DictConfig, OmegaConf

from seq2seq import plugins
from seq2seq.checkpoint import FORMAT_VERSION, save_checkpoint
from seq2seq.config.schema import register_configs
from seq2seq.data.batching import collate
from seq2seq.data.settings import DataConfig
from seq2seq.lab.lab_models import TOY_GRU

# A toy Transformer trained for two updates: a checkpoint of the right shapes in seconds.
TOY_TRANSFORMER = [
    "data=toy_reverse", "data.source.train_size=256", "data.source.valid_size=8",
    "data.source.test_size=8", "data.max_tokens=512", "trainer.max_steps=2",
    "trainer.valid_every=2", "trainer.threads=1", "trainer.test_search.beam_size=1",
    "logging.progress_bar=false", "logging.tensorboard=false",
    "encoder=transformer", "decoder=transformer", "attention=multihead",
    "encoder.hidden_size=16", "decoder.hidden_size=16", "model.embed_dim=16",
    "encoder.num_layers=1", "encoder.heads=4", "decoder.num_layers=2", "decoder.heads=4",
    "attention.heads=4", "encoder.ff_size=24", "decoder.ff_size=24",
]  # fmt: skip

# A model small enough to train on the toy tasks in seconds on one CPU core.
TINY_TOY = [
    *TOY_GRU,
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


@contextmanager
def plugins_unloaded_after() -> Iterator[None]:
    """Unload every plugin imported inside and restore sys.path, so that the tests after
    see the built-ins only (`seq2seq.plugins.unload`)."""
    before, path = set(plugins.imported()), list(sys.path)
    try:
        yield
    finally:
        for plugin in set(plugins.imported()) - before:
            plugins.unload(plugin)
        sys.path[:] = path


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


def synthetic_data_config(tmp_path: Path, **overrides) -> DataConfig:
    """The data config of a small corpus served as `toy-eng.zip` by the `mirror` fixture
    (tests/conftest.py), its files below `tmp_path / "data"`."""
    source = {"name": "tabular", "url": "https://example.org/anki/toy-eng.zip", "member": "toy.txt"}
    settings = {
        "name": "synthetic", "source": source,
        "root": str(tmp_path / "data"), "valid_size": 20, "test_size": 20,
        "src_vocab_size": 30, "tgt_vocab_size": 30, "max_len": 15, "max_tokens": 200,
    }  # fmt: skip
    return DataConfig(**{**settings, **overrides})


def run_main(main, capsys, *argv: object) -> tuple[int, str, str]:
    """A command's exit code, stdout and stderr (a usage error's SystemExit included)."""
    try:
        code = main([str(arg) for arg in argv])
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def dot_score_plugin(name: str, scale: float) -> str:
    """The source of a plugin module registering score `name`, `s(q, k) = scale · qᵀk`: a
    `DotProductScore` that refuses queries and keys of different widths when built, as the
    built-in `dot` does (what the plugin tests write to a user's folder)."""
    cls = "".join(word.title() for word in name.split("_")) + "Score"
    refusal = f"{name} compares queries and keys of one width"
    return f'''\
"""A plugin score: s(q, k) = {scale} qᵀk."""
from seq2seq import registry
from seq2seq.models.attention.scores import DotProductScore


@registry.register("score", "{name}")
class {cls}(DotProductScore):
    scale = {scale}

    def __init__(self, query_width, key_width, heads):
        super().__init__()
        if query_width != key_width:
            raise ValueError("{refusal}")
'''


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"  # the first eight bytes of every PNG file


def is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == PNG_SIGNATURE


# The letter-reversal task of the export and quantisation tests: a model trained on it
# in-process for a few seconds, saved as the trainer saves it.
LETTERS = "abcdefghijkl"


def letters(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.choices(LETTERS, k=rng.randint(3, 9))) for _ in range(count)]


def reversed_text(line: str) -> str:
    return " ".join(reversed(line.split()))


def save_model(path, model, cfg, tokenizer) -> None:
    """A checkpoint as the trainer writes it (the keys a translator reads)."""
    side = {"lang": "toy", "kind": tokenizer.kind, "model": tokenizer.to_bytes()}
    payload = {
        "format": FORMAT_VERSION,
        "model": model.state_dict(),
        "config": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
        "tokenizers": {"src": side, "tgt": side},
        "progress": {"step": 0},
    }
    save_checkpoint(path, payload)


def train_reverse(model, tokenizer, steps: int = 350) -> None:
    """Teacher-forced cross-entropy on random pairs of `letters` and their reversal (a few
    seconds on one thread)."""
    rng, optimizer = random.Random(1), torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        lines = letters(rng, 64)
        pairs = [(tokenizer.encode(line), tokenizer.encode(reversed_text(line))) for line in lines]
        batch = collate(pairs, list(range(len(pairs))))
        logits, _ = model(batch.src, batch.src_mask, batch.tgt_in)
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def lab_quick_fixture(experiment):
    """A module fixture `quick = lab_quick_fixture(EXPERIMENT)`: the experiment's quick
    finding, from the session's `lab_quick` (run once per session)."""

    @pytest.fixture(scope="module")
    def quick(lab_quick):
        return lab_quick(experiment)

    return quick


def compare_settings(*overrides: str):
    """The settings `seq2seq-compare OVERRIDES` runs with (its arguments made lists first),
    composed as in its own process: without the training schemas other tests stored in the
    ConfigStore, with which Hydra would read `attention=` as a choice of their group."""
    from hydra.core.config_store import ConfigStore

    from seq2seq.cli.compare import as_lists

    repo = ConfigStore.instance().repo
    stored = dict(repo)
    for group in set(repo) & {"attention", "encoder", "decoder", "score", "region"}:
        del repo[group]
    try:
        with initialize_config_module("seq2seq.configs.compare", version_base="1.3"):
            cfg = compose("compare", overrides=as_lists(list(overrides)))
    finally:
        repo.clear()
        repo.update(stored)
    return OmegaConf.to_object(cfg)


def text_pair_overrides(corpus: Path) -> list[str]:
    """The overrides that name a `data=text_pair` corpus (English → Chinese) whose files are
    `corpus/train.en`, `corpus/train.zh`, `corpus/valid.*` and `corpus/test.*`."""
    return ["data=text_pair", "data.name=given", "data.src_lang=en", "data.tgt_lang=zh",
            *(f"data.source.{split}_prefix={corpus / split}"
              for split in ("train", "valid", "test"))]  # fmt: skip
