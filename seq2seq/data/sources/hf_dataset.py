"""A Hugging Face dataset opened and checked against the run (`data.source.name=hf`,
`seq2seq.data.sources.huggingface`): its settings (`HuggingFaceOptions`), whether it is
local or on the hub, its splits, its columns and language codes, and the digest that keys
its prepared files. `datasets` is imported only here, and only when a dataset is opened."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import sha256_of
from seq2seq.data.settings import DEFAULT_MAX_LINE_BYTES, DataConfig
from seq2seq.data.split import SPLIT_NAMES

INSTALL_HINT = "pip install 'seq2seq-attention[hf]'"
SPLIT_KEYS = {split: f"{split}_split" for split in SPLIT_NAMES}  # train -> train_split
SAVED_MARKERS = ("dataset_dict.json", "state.json")  # what save_to_disk writes at the top
TEXT_TYPES = ("string", "large_string")
SINGLE_SPLIT = "train"  # the split of a saved Dataset or of parquet files not named by split


@dataclass(frozen=True)
class HuggingFaceOptions:
    """The dataset, its splits and its layout (module docstring)."""

    dataset: str = ""  # hub name (Helsinki-NLP/opus-100) or local path (saved folder, parquet)
    config: str | None = None  # hub: the dataset's configuration (subset), e.g. en-zh
    data_dir: str | None = None  # a folder inside the dataset (hub repository or local folder)
    revision: str | None = None  # hub: branch, tag or commit; a commit pins the corpus
    streaming: bool = False  # hub: read over the network as it goes, nothing downloaded whole
    train_split: str = "train"  # the dataset's split for training
    valid_split: str | None = "validation"  # null (with test_split): split train_split by hashes
    test_split: str | None = "test"
    translation_field: str = "translation"  # the column of {language code: sentence} dicts
    source_code: str | None = None  # data.src_lang's code in those dicts; null: data.src_lang
    target_code: str | None = None  # data.tgt_lang's code in those dicts; null: data.tgt_lang
    source_column: str | None = None  # with target_column: two text columns, not the dicts
    target_column: str | None = None
    licence: str = ""  # the corpus's licence, for the record
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES  # a longer sentence is malformed
    max_malformed_share: float = 0.5  # more skipped rows than this in a split: wrong dataset


@dataclass(frozen=True)
class OpenedDataset:
    """The dataset's splits the run reads, checked, by run split (train, valid, test;
    train alone for a hash split), with the text that names each in messages."""

    splits: Mapping[str, Any]
    names: Mapping[str, str]


def open_dataset(cfg: DataConfig) -> OpenedDataset:
    """Open the dataset and check the splits, columns and codes the run reads;
    CorpusError naming the key of the first that does not fit."""
    options: HuggingFaceOptions = cfg.source_options
    datasets = import_datasets()
    local = local_path(options)
    available = _open_local(datasets, local) if local else _open_hub(datasets, options)
    chosen = {split: _chosen_split(options, available, split) for split in run_splits(options)}
    names = {split: _described(options, name) for split, name in chosen.items()}
    for split, name in chosen.items():
        _check_columns(datasets, cfg, available[name], names[split])
    return OpenedDataset({split: available[name] for split, name in chosen.items()}, names)


def import_datasets() -> ModuleType:
    """The `datasets` package; CorpusError naming the extra when it is not installed."""
    try:
        import datasets
    except ImportError as error:
        raise CorpusError(
            f"data.source.name=hf needs the datasets package, not installed: {INSTALL_HINT}"
        ) from error
    return datasets


def hash_split(options: HuggingFaceOptions) -> bool:
    """True when valid and test are split from train_split by hashes."""
    return options.valid_split is None and options.test_split is None


def run_splits(options: HuggingFaceOptions) -> tuple[str, ...]:
    """The run's splits read from a split of the dataset each."""
    return ("train",) if hash_split(options) else SPLIT_NAMES


def two_columns(options: HuggingFaceOptions) -> bool:
    """True for the layout of two text columns (source_column, target_column)."""
    return options.source_column is not None


def check_layout_keys(options: HuggingFaceOptions) -> None:
    columns = (options.source_column, options.target_column)
    if (columns[0] is None) != (columns[1] is None):
        raise ValueError(
            "data.source.source_column and data.source.target_column name the two text "
            f"columns together (or are both null, for data.source.translation_field); got "
            f"{columns[0]!r} and {columns[1]!r}"
        )
    if two_columns(options):
        if columns[0] == columns[1] or not all(name.strip() for name in columns):
            raise ValueError(
                "data.source.source_column and data.source.target_column must be two "
                f"different column names, got {columns[0]!r} and {columns[1]!r}"
            )
        for key in ("source_code", "target_code"):
            if getattr(options, key) is not None:
                raise ValueError(
                    f"data.source.{key} names a code of data.source.translation_field's dicts; "
                    "with data.source.source_column and target_column it must be null"
                )
    elif not options.translation_field.strip():
        raise ValueError(
            "data.source.translation_field must name the column of language-code dicts "
            "(or set data.source.source_column and data.source.target_column)"
        )


def check_split_keys(options: HuggingFaceOptions) -> None:
    if (options.valid_split is None) != (options.test_split is None):
        raise ValueError(
            "data.source.valid_split and data.source.test_split name two splits of the "
            "dataset, or are both null to split data.source.train_split by hashes; got "
            f"{options.valid_split!r} and {options.test_split!r}"
        )
    names = [getattr(options, key) for key in SPLIT_KEYS.values()]
    given = [name for name in names if name is not None]
    if not options.train_split.strip() or len(set(given)) < len(given):
        raise ValueError(
            "data.source.train_split, valid_split and test_split must name different "
            f"splits (a sentence in two would leak), got {', '.join(map(repr, names))}"
        )


def local_path(options: HuggingFaceOptions) -> Path | None:
    """The local folder or file `dataset` names (below `data_dir` when set), or None for a
    hub name; CorpusError for a path that does not exist."""
    given = options.dataset
    path = Path(given).expanduser()
    looks_local = given.startswith(("/", ".", "~")) or given.count("/") > 1
    if not path.exists() and not looks_local and not given.endswith(".parquet"):
        return None
    if options.config is not None or options.revision is not None:
        key = "config" if options.config is not None else "revision"
        raise CorpusError(
            f"data.source.{key}: {given!r} is a local dataset, which has no "
            "configurations or revisions; set it to null (or name a hub dataset)"
        )
    place = path / options.data_dir if options.data_dir else path
    if not place.exists():
        key = "data_dir" if options.data_dir and path.exists() else "dataset"
        raise CorpusError(
            f"data.source.{key}: no folder or file {place} (a folder saved with "
            "save_to_disk, a parquet file or a folder of them, or a hub name such as "
            "Helsinki-NLP/opus-100)"
        )
    return place


def _open_local(datasets: ModuleType, path: Path) -> Mapping[str, Any]:
    """The splits of a saved dataset or of parquet files (module docstring)."""
    if is_saved(path):
        loaded = _loaded(lambda: datasets.load_from_disk(str(path)), "dataset", path)
        return loaded if isinstance(loaded, Mapping) else {SINGLE_SPLIT: loaded}
    local_files(path)  # parquet files, or the error that there are none
    where = {"data_dir": str(path)} if path.is_dir() else {"data_files": str(path)}
    return _loaded(
        lambda: datasets.load_dataset("parquet", streaming=True, **where), "dataset", path
    )


def _parquet_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.suffix == ".parquet" else []
    return sorted(item for item in path.rglob("*.parquet") if item.is_file())


def _open_hub(datasets: ModuleType, options: HuggingFaceOptions) -> Mapping[str, Any]:
    """The splits of a hub dataset, downloaded into the `datasets` cache or streamed."""

    def load() -> Any:
        return datasets.load_dataset(
            options.dataset,
            options.config,
            data_dir=options.data_dir,
            revision=options.revision,
            streaming=options.streaming,
        )

    return _loaded(load, "dataset", options.dataset, hub=True)


def _loaded(load: Any, key: str, what: Any, *, hub: bool = False) -> Any:
    """`load()`; its failure as one CorpusError line naming the key. `datasets` raises
    errors of many kinds from its layers (the hub's HTTP client, the builders, arrow), so
    every Exception is caught; the message is the library's, on one line."""
    try:
        return load()
    except Exception as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        if "BuilderConfig" in reason or "config name" in reason.lower():
            key = "config"  # "BuilderConfig 'x' not found. Available: [...]", "Config name is missing"
        place = "from the Hugging Face hub" if hub else "from disk"
        hint = ""
        if hub and key == "dataset":
            hint = f" (nor is {str(what)!r} a folder or file here)"
        if hub and isinstance(error, ConnectionError):
            hint += "; without the network, a dataset downloaded before loads with HF_HUB_OFFLINE=1"
        raise CorpusError(
            f"data.source.{key}: cannot load {str(what)!r} {place}: {reason}{hint}"
        ) from error


def _chosen_split(options: HuggingFaceOptions, available: Mapping[str, Any], split: str) -> str:
    """The dataset's split the run's `split` reads; CorpusError listing the splits."""
    key = SPLIT_KEYS[split]
    name = getattr(options, key)
    if name in available:
        return name
    hint = ""
    if split != "train":
        hint = "; null valid_split and test_split split train_split by hashes instead"
    raise CorpusError(
        f"data.source.{key}: no split {name!r} in {_described(options)} "
        f"(splits: {', '.join(available) or 'none'}){hint}"
    )


def _described(options: HuggingFaceOptions, split: str | None = None) -> str:
    """`Helsinki-NLP/opus-100 (config en-zh) split 'train'`, for messages and the summary."""
    text = options.dataset
    if options.config is not None:
        text += f" (config {options.config})"
    if options.data_dir is not None:
        text += f" (data_dir {options.data_dir})"
    return text if split is None else f"{text} split {split!r}"


def _check_columns(datasets: ModuleType, cfg: DataConfig, data: Any, where: str) -> None:
    """CorpusError naming the key when a column or a language code the layout reads is
    not in the split `data` (from its features, or its first row when they are unknown)."""
    options: HuggingFaceOptions = cfg.source_options
    features, first = _features_or_first_row(data)
    columns = list(features) if features is not None else list(first or {})
    if two_columns(options):
        for key in ("source_column", "target_column"):
            name = getattr(options, key)
            if name not in columns:
                raise CorpusError(
                    f"data.source.{key}: no column {name!r} in {where} (columns: "
                    f"{', '.join(columns) or 'none'})"
                )
            _check_text_column(datasets, features, key, name, where)
        return
    name = options.translation_field
    if name not in columns:
        raise CorpusError(
            f"data.source.translation_field: no column {name!r} in {where} (columns: "
            f"{', '.join(columns) or 'none'}); two text columns are read with "
            "data.source.source_column and data.source.target_column"
        )
    codes = _codes(datasets, features[name] if features is not None else (first or {})[name])
    if codes is None:
        raise CorpusError(
            f"data.source.translation_field: column {name!r} of {where} is not a dict of "
            "language codes; two text columns are read with data.source.source_column and "
            "data.source.target_column"
        )
    for side, code in zip(("source", "target"), language_codes(cfg)):
        if code not in codes:
            key = f"data.source.{side}_code" if getattr(options, f"{side}_code") else (
                "data.src_lang" if side == "source" else "data.tgt_lang"
            )  # fmt: skip
            raise CorpusError(
                f"{key}: no language {code!r} in column {name!r} of {where} (codes: "
                f"{', '.join(codes)}); data.source.{side}_code names the dataset's code "
                "where it differs from the language's"
            )


def _features_or_first_row(data: Any) -> tuple[Mapping[str, Any] | None, Mapping | None]:
    """(the split's features, None) when it knows them, else (None, its first row)."""
    features = getattr(data, "features", None)
    if features is not None:
        return features, None
    return None, next(iter(data), None)


def _codes(datasets: ModuleType, feature: Any) -> list[str] | None:
    """The language codes of a translation column's feature (or of a row's value)."""
    if isinstance(feature, datasets.Translation):
        return list(feature.languages)
    if isinstance(feature, Mapping):
        return [str(code) for code in feature]
    return None


def _check_text_column(
    datasets: ModuleType, features: Mapping | None, key: str, name: str, where: str
) -> None:
    feature = None if features is None else features[name]
    if isinstance(feature, datasets.Value) and feature.dtype not in TEXT_TYPES:
        raise CorpusError(
            f"data.source.{key}: column {name!r} of {where} holds {feature.dtype}, not text"
        )
    if feature is not None and not isinstance(feature, datasets.Value):
        raise CorpusError(
            f"data.source.{key}: column {name!r} of {where} holds {type(feature).__name__} "
            "values, not text"
        )


def language_codes(cfg: DataConfig) -> tuple[str, str]:
    """The codes of the source and target sides in the translation dicts."""
    options: HuggingFaceOptions = cfg.source_options
    return options.source_code or cfg.src_lang, options.target_code or cfg.tgt_lang


def is_saved(path: Path) -> bool:
    """True for a folder written by `save_to_disk`."""
    return path.is_dir() and any((path / marker).is_file() for marker in SAVED_MARKERS)


def local_files(path: Path) -> tuple[Path, ...]:
    """The files a local dataset is read from: every file of a saved folder, or the
    parquet files; CorpusError when it is neither."""
    if is_saved(path):
        return tuple(sorted(item for item in path.rglob("*") if item.is_file()))
    parquet = _parquet_files(path)
    if not parquet:
        raise CorpusError(
            f"data.source.dataset: {path} is neither a folder saved with save_to_disk (it "
            f"would hold {' or '.join(SAVED_MARKERS)}) nor a parquet file or folder of them"
        )
    return tuple(parquet)


def files_digest(root: Path, files: tuple[Path, ...]) -> str:
    """A sha256 of the files' contents, each named relative to the dataset."""
    digest = hashlib.sha256(b"hf local\n")
    for path in files:
        name = path.relative_to(root).as_posix() if path != root else path.name
        digest.update(f"{name} {sha256_of(path)}\n".encode())
    return digest.hexdigest()


def hub_digest(options: HuggingFaceOptions, opened: OpenedDataset | None) -> str:
    """A sha256 of what names a hub dataset and, opened (downloaded), the `datasets`
    fingerprint of each split read; a streamed one has none."""
    fingerprints = {}
    if opened is not None:
        fingerprints = {
            split: getattr(data, "_fingerprint", None) for split, data in opened.splits.items()
        }
    identity = {
        "dataset": options.dataset,
        "config": options.config,
        "data_dir": options.data_dir,
        "revision": options.revision,
        "fingerprints": fingerprints,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
