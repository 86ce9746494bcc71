"""seq2seq: a sequence-to-sequence translation trainer that shows what attention does.

The Python API (`seq2seq.api`) is importable from here:

    import seq2seq

    model = seq2seq.load("outputs/default_cpu/<date_time>/checkpoints/best.pt")
    model.translate("我爱中国。")    # in Jupyter: the attention viewer, inline

`import seq2seq` stays light (no torch, no Hydra): `seq2seq.api` is imported when one of
its names is first used (`__getattr__`, PEP 562).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# The names of `seq2seq.api` offered here, imported on first use.
API_NAMES = ("Comparison", "Model", "Result", "TrainResult", "compare", "evaluate", "load", "train")
__all__ = [*API_NAMES, "__version__"]


def __getattr__(name: str) -> Any:
    """`seq2seq.load`, `seq2seq.train`, ...: the API's names, its module imported then."""
    if name in API_NAMES:
        from seq2seq import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *API_NAMES})
