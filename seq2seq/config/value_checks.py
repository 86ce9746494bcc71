"""Range checks of a composed training config, run before anything is prepared or built.

The schemas in `seq2seq.config.schema` check types; these check values: a count that must be at
least 1, a dropout in [0, 1), a learning rate that is finite and positive. Without them
`trainer.accumulate=0` is a ZeroDivisionError after training has started, `max_steps=-5`
is accepted, a NaN `grad_clip` silently turns clipping off and a zero test beam fails only
after training has finished.

`check_settings(cfg)` raises `seq2seq.config.build.ConfigError` naming the first bad key as it is
written on the command line (`trainer.accumulate must be at least 1, got 0`). It runs at the
top of `seq2seq.runs.assemble.train_and_test` and on every config read from a checkpoint
(`seq2seq.config.stored`). A key a section lacks is not checked, so the same rules
serve every encoder, decoder and attention schema.

The attention's score and region are checked against their own options dataclasses
(`seq2seq.option_rules`, declared beside each class): an unknown name lists the registered
ones, a key the chosen component lacks names its closest option (`attention.region.windw`),
a value out of range names its range. `complete_option_nodes(cfg)` also writes the full
nodes into the config at start-up, those of the data's source too (`data.source`), so the
run's checkpoints store every option.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seq2seq import registry
from seq2seq.config.build import ConfigError, plain
from seq2seq.config.schema import (
    ALIGNMENT_LOSSES,
    LAYER_LABELS,
    LAYER_TRAININGS,
    AlignmentConfig,
    needs_training_links,
)
from seq2seq.config.search_settings import SearchSettings, SearchSettingsError
from seq2seq.data.settings import documents_node, source_name, source_node
from seq2seq.models.attention.none import CONTEXTS
from seq2seq.models.attention.options import OPTION_GROUPS, component_node
from seq2seq.models.model import SUMMARIES
from seq2seq.option_rules import OptionError

# A rule returns what is wrong with a value ("must be at least 1"), or None when it is fine.
Rule = Callable[[Any], "str | None"]
MAX_SEED = 2**32 - 1  # numpy's seeds are 32-bit
# The deepest stack accepted: deeper than any published NMT model (DeepNet's 1,000 layers).
# Every layer is a Python module, so depth costs time and memory before any weight does.
MAX_LAYERS = 1024
MAX_SUBWORD_NBEST = 1024  # trainer.subword_nbest: the candidates listed per sentence read
MAX_ALIGNMENT_SHIFT = 2  # alignment.shift: a Bahdanau-style decoder reads piece t at step t + 2
# torch threads accepted per core of this machine: more only oversubscribes the cores, and
# a count far above them (`torch.set_num_threads(100000)`) ends the process in a segfault.
THREADS_PER_CORE = 4


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def at_least(minimum: int) -> Rule:
    """A whole number >= minimum."""

    def rule(value: Any) -> str | None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            return f"must be an integer of at least {minimum}"
        return None

    return rule


def thread_limit() -> int:
    """The most torch threads a command or a training accepts on this machine."""
    return THREADS_PER_CORE * (os.cpu_count() or 1)


def threads_problem(value: Any, *, all_cores: bool) -> str | None:
    """What is wrong with a thread count on this machine ("must be ..."), or None; with
    `all_cores`, 0 is accepted and means torch's default, every core."""
    lowest, limit = (0 if all_cores else 1), thread_limit()
    if isinstance(value, int) and not isinstance(value, bool) and lowest <= value <= limit:
        return None
    zero = " (all cores)" if all_cores else ""
    cores = os.cpu_count() or 1
    return (
        f"must be an integer from {lowest}{zero} to {limit} "
        f"({THREADS_PER_CORE} per core of this machine's {cores})"
    )


def whole_between(minimum: int, maximum: int) -> Rule:
    """A whole number in [minimum, maximum]."""

    def rule(value: Any) -> str | None:
        if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
            return f"must be an integer from {minimum} to {maximum:,}"
        return None

    return rule


def in_range(low: float, high: float, *, low_open: bool = False, high_open: bool = True) -> Rule:
    """A finite number in [low, high) by default; `low_open` / `high_open` exclude the ends."""
    left, right = "(" if low_open else "[", ")" if high_open else "]"

    def rule(value: Any) -> str | None:
        if not is_number(value) or not math.isfinite(value):
            return f"must be a number in {left}{low}, {high}{right}"
        too_low = value <= low if low_open else value < low
        too_high = value >= high if high_open else value > high
        if too_low or too_high:
            return f"must be in {left}{low}, {high}{right}"
        return None

    return rule


def positive_finite(value: Any) -> str | None:
    if not is_number(value) or not math.isfinite(value) or value <= 0:
        return "must be a finite number > 0"
    return None


def non_negative_finite(value: Any) -> str | None:
    if not is_number(value) or not math.isfinite(value) or value < 0:
        return "must be a finite number >= 0"
    return None


def finite(value: Any) -> str | None:
    if not is_number(value) or not math.isfinite(value):
        return "must be a finite number"
    return None


def optional(rule: Rule) -> Rule:
    """`rule`, or null."""

    def check(value: Any) -> str | None:
        problem = None if value is None else rule(value)
        return None if problem is None else f"{problem} (or null)"

    return check


def grad_clip_rule(value: Any) -> str | None:
    """0 turns clipping off; otherwise a finite positive norm (NaN would turn it off too)."""
    if non_negative_finite(value) is not None:
        return "must be a finite number > 0, or 0 for no clipping"
    return None


def betas_rule(value: Any) -> str | None:
    fraction = in_range(0.0, 1.0)
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return "must be two numbers in [0, 1)"
    if any(fraction(beta) is not None for beta in value):
        return "must be two numbers in [0, 1)"
    return None


DEVICE_NAME = re.compile(r"auto|cpu|cuda(:[0-9]+)?")


def device_rule(value: Any) -> str | None:
    """`auto`, `cpu`, `cuda` or `cuda:N` (whether that device exists is checked later);
    torch's other device types (`meta`, `mps`, ...) cannot train here."""
    if isinstance(value, str) and DEVICE_NAME.fullmatch(value):
        return None
    return "must be auto, cpu, cuda or cuda:N"


def precision_rule(value: Any) -> str | None:
    """`trainer.precision`: the autocast of the training and validation passes."""
    return None if value in ("auto", "bf16", "fp32") else "must be auto, bf16 or fp32"


def heads_rule(value: Any) -> str | None:
    """`alignment.heads`: null (every head), or distinct head indices counted from 0."""
    if value is None:
        return None
    whole = at_least(0)
    if not isinstance(value, (list, tuple)) or not value or any(whole(v) for v in value):
        return "must be null or a non-empty list of head indices (integers >= 0)"
    if len(set(value)) != len(value):
        return "must not name a head twice"
    return None


def choice(allowed: tuple[str, ...]) -> Rule:
    """One of the names `allowed`."""

    def rule(value: Any) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}"

    return rule


def metric_rule(value: Any) -> str | None:
    """`trainer.select_metric`: a registered validation metric (`seq2seq.metrics`)."""
    names = registry.names("metric")
    return None if value in names else f"must be one of {', '.join(names)}"


FRACTION = in_range(0.0, 1.0)  # dropouts, label smoothing: [0, 1)
PROBABILITY = in_range(0.0, 1.0, high_open=False)  # [0, 1]

# Keys of encoder, decoder and attention parts (each schema holds some of them).
PART_RULES: dict[str, Rule] = {
    "hidden_size": at_least(1),
    "num_layers": whole_between(1, MAX_LAYERS),
    "heads": at_least(1),
    "ff_size": at_least(1),
    "kernel_size": at_least(1),
    "max_positions": at_least(1),
    "dropout": FRACTION,
    "attention_dropout": FRACTION,
    "head_dim": optional(at_least(1)),
    "forget_bias": optional(finite),
}

SECTION_RULES: dict[str, dict[str, Rule]] = {
    "encoder": PART_RULES,
    "decoder": PART_RULES,
    "attention": {**PART_RULES, "context": choice(CONTEXTS)},
    "model": {
        "summary": choice(SUMMARIES),
        "embed_dim": at_least(1),
        "embed_dropout": FRACTION,
        "word_dropout": FRACTION,
        "max_parameters": at_least(1),
    },
    "optim": {
        "lr": positive_finite,
        "eps": positive_finite,
        "weight_decay": non_negative_finite,
        "betas": betas_rule,
    },
    "schedule": {
        "warmup_steps": at_least(0),
        "min_lr_ratio": PROBABILITY,
        "factor": in_range(0.0, 1.0, low_open=True),
        "patience": at_least(0),
    },
    "trainer": {
        "max_steps": at_least(1),
        "max_epochs": at_least(1),
        "max_minutes": optional(positive_finite),
        "valid_every": at_least(1),
        "log_every": at_least(1),
        "patience": at_least(0),
        "converged_gain": non_negative_finite,
        "converged_fraction": in_range(0.0, 1.0, low_open=True, high_open=True),
        "converged_validations": at_least(1),
        "select_metric": metric_rule,
        "grad_clip": grad_clip_rule,
        "accumulate": at_least(1),
        "label_smoothing": FRACTION,
        "short_first_epochs": at_least(0),
        "scheduled_sampling": PROBABILITY,
        "seed": in_range(0, MAX_SEED, high_open=False),
        "threads": at_least(0),
        "average_last": at_least(0),
        "ema_decay": FRACTION,
        "subword_nbest": whole_between(0, MAX_SUBWORD_NBEST),
        "subword_alpha": non_negative_finite,
        "source_unk_rate": FRACTION,
        "valid_max_sentences": optional(at_least(1)),
        "max_nonfinite_steps": at_least(1),
        "device": device_rule,
        "precision": precision_rule,
    },
    "alignment": {
        "layer": whole_between(-MAX_LAYERS, MAX_LAYERS),
        "heads": heads_rule,
        "weight": non_negative_finite,
        "loss": choice(ALIGNMENT_LOSSES),
        "shift": optional(whole_between(0, MAX_ALIGNMENT_SHIFT)),
        "training": choice(LAYER_TRAININGS),
        "layer_heads": at_least(1),
        "gradient": in_range(0, 1, high_open=False),
        "teacher_layer": whole_between(-MAX_LAYERS, MAX_LAYERS),
        "teacher_heads": heads_rule,
        "teacher_shift": optional(whole_between(0, MAX_ALIGNMENT_SHIFT)),
        "labels": choice(LAYER_LABELS),
    },
}


def check_section(section: str, values: Mapping[str, Any], rules: Mapping[str, Rule]) -> None:
    """Apply the rules of the keys `values` holds; ConfigError naming the first bad key."""
    for key, rule in rules.items():
        if key not in values:
            continue
        problem = rule(values[key])
        if problem is not None:
            raise ConfigError(f"{section}.{key} {problem}, got {values[key]!r}")


def check_test_search(values: Mapping[str, Any]) -> None:
    """`trainer.test_search` through `SearchSettings`' own checks, before training starts."""
    try:
        SearchSettings(**values)
    except SearchSettingsError as error:
        raise ConfigError(f"trainer.test_search.{error.field} {error.problem}") from error
    except TypeError as error:  # a key SearchSettings does not know
        raise ConfigError(f"trainer.test_search: {error}") from error


def longest_sequence(data: Mapping[str, Any]) -> int | None:
    """The most positions one sequence of a batch takes: `data.max_len` pieces (the toy
    tasks' `data.source.max_len` when shorter) plus the EOS of a source or the BOS of a
    target."""
    max_len = data.get("max_len")
    if not is_number(max_len):
        return None
    source = data.get("source")
    toy_max_len = source.get("max_len") if isinstance(source, Mapping) else None
    if source_name(data) == "toy" and is_number(toy_max_len):
        max_len = min(max_len, toy_max_len)
    return int(max_len) + 1


def check_positions(config: Mapping[str, Any]) -> None:
    """An encoder or decoder with a position table (`max_positions`) must hold the longest
    sequence the data can give it; else training fails at the first long batch."""
    data = config.get("data")
    longest = longest_sequence(data) if isinstance(data, Mapping) else None
    if longest is None:
        return
    for section in ("encoder", "decoder"):
        part = config.get(section)
        positions = part.get("max_positions") if isinstance(part, Mapping) else None
        if is_number(positions) and positions < longest:
            raise ConfigError(
                f"{section}.max_positions={positions} is smaller than the {longest} positions "
                f"of the longest sequence (data.max_len={data['max_len']} pieces and its "
                f"EOS/BOS): raise {section}.max_positions or lower data.max_len"
            )


def check_summary(config: Mapping[str, Any]) -> None:
    """A `model.summary` other than auto needs a decoder that starts from it (a recurrent
    one); `final` also an encoder with a final state (a recurrent one)."""
    model, encoder = config.get("model"), _registered(config, "encoder")
    summary = model.get("summary") if isinstance(model, Mapping) else None
    if summary in (None, "auto"):
        return
    decoder = _registered(config, "decoder")
    if decoder is not None and not getattr(decoder.builder, "starts_from_summary", True):
        raise ConfigError(f"model.summary={summary}: the {decoder.name} decoder does not start "
                          "from a summary of the source (it attends from its first step); use "
                          "a recurrent decoder, or attention=none "
                          "attention.context=attention_pool")  # fmt: skip
    if summary != "final" or encoder is None:
        return
    if encoder.builder.widths(config["encoder"])[1] is None:
        raise ConfigError(f"model.summary=final needs an encoder with a final state (rnn, lstm, "
                          f"gru); the {encoder.name} encoder has none: use mean or "
                          "attention_pool")  # fmt: skip


def check_alignment_layer(config: Mapping[str, Any]) -> None:
    """A separate alignment layer (`alignment=layer`): heads that divide the decoder's width,
    a decoder with a pass without the future mask for `query=full_context`, and attention
    weights to learn from when unsupervised."""
    alignment = config.get("alignment")
    if not isinstance(alignment, Mapping) or not alignment.get("separate"):
        return
    if alignment.get("guided"):
        raise ConfigError("alignment.guided and alignment.separate are two choices of one "
                          "option: alignment=guided or alignment=layer")  # fmt: skip
    decoder = _registered(config, "decoder")
    width, heads = config["decoder"].get("hidden_size"), alignment.get("layer_heads", 1)
    if is_number(width) and is_number(heads) and heads >= 1 and width % heads:
        raise ConfigError(f"alignment.layer_heads={heads} must divide the decoder's "
                          f"hidden_size ({width})")  # fmt: skip
    if _name(alignment.get("query")) == "full_context" and decoder is not None:
        if not hasattr(decoder.builder, "full_context"):
            raise ConfigError(
                "alignment.query=full_context needs a decoder with a pass without the future "
                f"mask (decoder=transformer); the {decoder.name} decoder has none"
            )
    attention = _registered(config, "attention")
    if _name(alignment.get("training")) == "unsupervised" and attention is not None:
        if attention.name == "none":
            raise ConfigError(
                "alignment.training=unsupervised learns from the translation attention's "
                "weights, and attention=none has none: choose an attention, or "
                "alignment.training=guided"
            )


def _name(value: Any) -> Any:
    """An enum's name, or the value itself."""
    return getattr(value, "name", value)


def check_guidance(config: Mapping[str, Any]) -> None:
    """Guided alignment needs attention weights to supervise, heads that the attention
    has and, for `alignment.full_context`, a decoder with a pass without the future mask."""
    alignment = config.get("alignment")
    if not isinstance(alignment, Mapping) or not alignment.get("guided"):
        return
    attention = _registered(config, "attention")
    if attention is not None and attention.name == "none":
        raise ConfigError(
            "alignment=guided supervises attention weights, and attention=none has none: "
            "choose an attention (attention=additive, attention=multihead, ...)"
        )
    heads = config["attention"].get("heads", 1) if attention is not None else None
    chosen = alignment.get("heads") or []
    if is_number(heads) and any(is_number(head) and head >= heads for head in chosen):
        raise ConfigError(
            f"alignment.heads={list(chosen)} names a head the attention lacks: it has "
            f"{heads} (attention.heads), counted from 0"
        )
    decoder = _registered(config, "decoder")
    if alignment.get("full_context") and decoder is not None:
        if not hasattr(decoder.builder, "full_context"):
            raise ConfigError(
                "alignment.full_context=true needs a decoder with a pass without the future "
                f"mask (decoder=transformer); the {decoder.name} decoder has none"
            )


def check_subword_sampling(config: Mapping[str, Any]) -> None:
    """Subword regularisation (`trainer.subword_nbest` >= 2) draws segmentations from the
    n-best of unigram models, and changes the pieces that the links of guided alignment are
    given on: both refused at start-up, naming the keys."""
    trainer, data = config.get("trainer"), config.get("data")
    if not isinstance(trainer, Mapping) or (trainer.get("subword_nbest") or 0) < 2:
        return
    if isinstance(data, Mapping) and data.get("model_type", "unigram") != "unigram":
        raise ConfigError(
            f"trainer.subword_nbest={trainer['subword_nbest']} samples segmentations of unigram "
            f"subword models, and data.model_type={data['model_type']} has no n-best: set "
            "data.model_type=unigram or trainer.subword_nbest=0"
        )
    if isinstance(config.get("alignment"), Mapping) and needs_training_links(config):
        raise ConfigError(
            f"trainer.subword_nbest={trainer['subword_nbest']} changes the pieces that guided "
            "alignment's links are given on: set trainer.subword_nbest=0, or train the "
            "alignment without links (alignment=none, alignment.training=unsupervised)"
        )


def check_reinforce(config: Mapping[str, Any]) -> None:
    """Hard attention trained by REINFORCE records its sampled keys' log-probabilities in
    Python lists during the forward pass and forms its surrogate from them
    (`seq2seq.training.reinforce`); that path is not built for `trainer.compile`, so the
    pair is refused at start-up rather than compiled into something untested."""
    trainer, attention = config.get("trainer"), config.get("attention")
    if not isinstance(trainer, Mapping) or not trainer.get("compile"):
        return
    if not isinstance(attention, Mapping):
        return
    region = option_nodes(attention).get("region", {})
    if region.get("estimator") == "reinforce":
        raise ConfigError(
            "attention.region.estimator=reinforce does not run with trainer.compile=true (the "
            "REINFORCE path records sampled keys in Python lists, not built for "
            "torch.compile): set trainer.compile=false, or choose "
            "attention.region.estimator=straight_through"
        )


def option_nodes(attention: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The full nodes of the attention's score and region (those it has: none for
    `attention=none`), checked; ConfigError naming the first bad key (`attention.region.window`)."""
    nodes = {}
    for group in OPTION_GROUPS:
        if group in attention:
            try:
                nodes[group] = component_node(group, attention[group], f"attention.{group}")
            except OptionError as error:
                raise ConfigError(str(error)) from error
    return nodes


def complete_option_nodes(cfg: DictConfig) -> None:
    """Replace `attention.score` / `attention.region` and `data.source` of a composed
    config by their full nodes (`attention.score=dot` → `{name: dot}`, missing options at
    their defaults), so that what the run stores names every option; ConfigError for a
    node that is wrong. A run without guided alignment (`alignment=none`, composed as `{}`)
    gets the unguided defaults, as every run stored them before."""
    if "alignment" in cfg:
        unguided = cfg.alignment or {}  # alignment=none: {} (or null)
        if not unguided.get("guided"):
            cfg.alignment = OmegaConf.merge(OmegaConf.structured(AlignmentConfig), unguided)
    attention = cfg.get("attention")
    if isinstance(attention, DictConfig):
        for group, node in option_nodes(plain(attention)).items():
            attention[group] = node
    data = cfg.get("data")
    if isinstance(data, DictConfig) and "source" in data:
        try:
            data.source = source_node(plain(data)["source"])
        except OptionError as error:
            raise ConfigError(str(error)) from error
    if isinstance(data, DictConfig) and data.get("documents") is not None:
        try:  # every option of the pseudo-documents stored, the order by its name
            data.documents = documents_node(plain(data)["documents"])
        except ValueError as error:
            raise ConfigError(str(error)) from error


def _registered(config: Mapping[str, Any], group: str) -> registry.Component | None:
    """The registered component the config's `group` node names, or None."""
    node = config.get(group)
    if not isinstance(node, Mapping):
        return None
    try:
        return registry.of_node(group, node)
    except ValueError:  # UnknownComponent: refused elsewhere, by the allow-list
        return None


def check_settings(cfg: DictConfig | Mapping[str, Any]) -> None:
    """Raise ConfigError naming the first out-of-range value of a training config."""
    config = plain(cfg)
    for section, rules in SECTION_RULES.items():
        values = config.get(section)
        if isinstance(values, Mapping):
            check_section(section, values, rules)
    if isinstance(config.get("attention"), Mapping):
        option_nodes(config["attention"])
    trainer = config.get("trainer")
    if isinstance(trainer, Mapping) and isinstance(trainer.get("test_search"), Mapping):
        check_test_search(trainer["test_search"])
    check_positions(config)
    check_summary(config)
    check_guidance(config)
    check_alignment_layer(config)
    check_subword_sampling(config)
    check_reinforce(config)


def check_machine(cfg: DictConfig | Mapping[str, Any]) -> None:
    """The settings that depend on the machine a training starts on, checked at start-up
    only (a checkpoint made on a larger machine stays readable): `trainer.threads` at most
    `thread_limit()`. ConfigError naming the key."""
    trainer = plain(cfg).get("trainer")
    if isinstance(trainer, Mapping) and "threads" in trainer:
        problem = threads_problem(trainer["threads"], all_cores=True)
        if problem is not None:
            raise ConfigError(f"trainer.threads {problem}, got {trainer['threads']!r}")
