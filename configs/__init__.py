"""The Hydra configs of seq2seq, installed with the package as `seq2seq.configs`.

In the repository they stay in the top-level `configs/` folder; `pyproject.toml` maps that
folder to the package `seq2seq.configs`, so a wheel or a non-editable install carries them
and Hydra finds them through its `pkg://` search path wherever the command is run. Users
add configs of their own with `--config-dir DIR` (or `hydra.searchpath`) without editing
anything here.
"""

from importlib.resources import files
from importlib.resources.abc import Traversable

SEARCH_PATH = f"pkg://{__name__}"  # what `@hydra.main(config_path=...)` is given


def config_files(group: str) -> list[Traversable]:
    """The YAML files of one config group (`data`, `encoder`, ...), sorted by name."""
    folder = files(__name__).joinpath(group)
    return sorted(
        (entry for entry in folder.iterdir() if entry.name.endswith(".yaml")),
        key=lambda entry: entry.name,
    )


def preset_names(group: str, prefix: str = "") -> list[str]:
    """The names (file stems) of one group's YAML files that start with `prefix`, sorted:
    what a command line chooses with `group=<name>`."""
    stems = (entry.name.removesuffix(".yaml") for entry in config_files(group))
    return [stem for stem in stems if stem.startswith(prefix)]
