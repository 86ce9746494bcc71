"""The CJK font for every plot: Noto Sans CJK SC, shipped inside the `mplfonts` package.

Matplotlib's default font (DejaVu Sans) has no Chinese glyphs: labels like 我爱中国 come
out as empty boxes with a "Glyph ... missing from font(s)" warning. We never rely on a
system font; we register the font file that `mplfonts` installs
(`mplfonts/fonts/NotoSansCJKsc-Regular.otf`, SIL Open Font License 1.1) with
matplotlib's font manager and draw every label with the family list
`[Noto Sans CJK SC, DejaVu Sans]`: Noto covers Chinese and Latin, DejaVu (matplotlib's
own) is the fallback for any glyph Noto lacks.
"""

from __future__ import annotations

import functools
import importlib.util
import warnings
from pathlib import Path

from matplotlib import font_manager

CJK_FONT_FILE = "NotoSansCJKsc-Regular.otf"
LATIN_FALLBACK = "DejaVu Sans"  # ships with matplotlib


class FontNotFoundError(FileNotFoundError):
    """The bundled CJK font is not installed."""


def cjk_font_path() -> Path:
    """Path of the Noto Sans CJK SC file inside the installed `mplfonts` package."""
    spec = importlib.util.find_spec("mplfonts")
    if spec is None or not spec.submodule_search_locations:
        raise FontNotFoundError(
            "the package 'mplfonts' (which ships the Chinese font for plots) is not installed; "
            "run `pip install mplfonts`"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "fonts" / CJK_FONT_FILE
    if not path.is_file():
        raise FontNotFoundError(
            f"CJK font file {path} is missing; reinstall the 'mplfonts' package"
        )
    return path


@functools.lru_cache(maxsize=1)
def cjk_font_family() -> tuple[str, ...]:
    """Register the bundled font once; return the family list `(Noto Sans CJK SC, DejaVu Sans)`.

    Use it as `matplotlib.rc_context({"font.family": list(cjk_font_family())})` around the
    code that creates a figure's texts.
    """
    path = cjk_font_path()
    font_manager.fontManager.addfont(str(path))
    name = font_manager.FontProperties(fname=str(path)).get_name()  # "Noto Sans CJK SC"
    resolved = Path(font_manager.findfont(font_manager.FontProperties(family=name)))
    if resolved != path:
        warnings.warn(
            f"matplotlib resolves the font family {name!r} to the system file {resolved}, "
            f"not to the bundled {path}; plots will use the system copy",
            stacklevel=2,
        )
    return (name, LATIN_FALLBACK)
