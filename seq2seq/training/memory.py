"""Keeping freed memory in the training process (`trainer.keep_freed_memory`).

glibc's malloc serves a large request (128 KiB and up, adjusted as the process runs) with a
fresh `mmap` and gives it back to the kernel when it is freed; the heap's free top is also
given back once it exceeds a threshold. A training update allocates the same large arrays
every time (activations, the (tokens, vocabulary) logits and their gradients), so every
update touches new pages, and the kernel zeroes each one on its first write: about 15,000
page faults per `default_cpu` update on a 2-core machine, 90,000 per `gru_additive` update
(BENCHMARKS.md, "Faster updates"). With mmap turned off and the trim threshold at its
maximum, freed blocks stay in the heap and the next update reuses them (about 100 page
faults per update); the price is that the process keeps its peak memory until it ends.

The setting is the process's (like `torch.set_num_threads`), applied once by
`seq2seq.runs.assemble.assemble_trainer`. Other C libraries (musl, macOS, Windows) are left
as they are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

# mallopt(3) parameters of glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
LARGEST_TRIM_THRESHOLD = 2**31 - 1  # an int, and more than any heap top this process frees


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to keep freed memory for reuse: no mmap for large blocks, no
    trimming of the heap. True when glibc took both settings; False (nothing changed) on
    another C library."""
    mallopt = _glibc_mallopt()
    if mallopt is None:
        log.debug("trainer.keep_freed_memory: not glibc, malloc left as it is")
        return False
    kept = mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, LARGEST_TRIM_THRESHOLD) == 1
    if not kept:
        log.warning("trainer.keep_freed_memory: glibc refused mallopt; malloc left as it is")
    return kept


def _glibc_mallopt():
    """glibc's `mallopt(int, int) -> int`, or None where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if not hasattr(libc, "gnu_get_libc_version"):
            return None  # musl and others: mallopt may be missing or a no-op
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt
