"""One engine's decoding measurement in a fresh Python process (`tools.bench.engines`).

Run as a file, `python tools/bench/decode_worker.py JOB.json`, with PYTHONPATH naming
the tree whose `seq2seq` package to measure: this checkout, or an older commit's worktree
for the "before" rows (so that only the search code differs, on the same machine in the
same run). It therefore uses only what every such tree has: `Translator.load(path,
device)`, `Translator.translate` and `SearchSettings`; the int8 option and the CTranslate2
engine only when the job asks for them.

The job (JSON): engine (pytorch | ctranslate2), path, quantization, threads, sources (a
file, one sentence per line), beams, reps. The worker translates 16 sentences to warm up,
then every beam `reps` times over all sources, and prints one JSON line: per beam the
seconds of each pass, the generated tokens (output pieces plus EOS of the best
hypothesis) and the last pass's translations.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

WARM_UP_SENTENCES = 16


def load_engine(job: dict[str, Any]):
    """The translator of the job: a checkpoint for pytorch, an export folder otherwise."""
    if job["engine"] == "ctranslate2":
        from seq2seq.export.ctranslate2_translator import CTranslate2Translator

        return CTranslate2Translator.load(
            job["path"], "cpu", job["threads"], compute_type=job["quantization"]
        )
    from seq2seq.search.translator import Translator

    if job["quantization"] == "float32":
        return Translator.load(job["path"], "cpu")  # what every tree's loader takes
    return Translator.load(job["path"], "cpu", quantization=job["quantization"])


def timed_passes(translator, sources: list[str], beam: int, reps: int) -> dict[str, Any]:
    """Seconds of `reps` passes over `sources` at `beam`, tokens and texts of the last."""
    from seq2seq.config.search_settings import SearchSettings

    settings, seconds = SearchSettings(beam_size=beam), []
    for _ in range(reps):
        started = time.perf_counter()
        translations = translator.translate(sources, settings)
        seconds.append(time.perf_counter() - started)
    tokens = sum(len(t.hypotheses[0].tokens) + 1 for t in translations if t.hypotheses)
    return {"seconds": seconds, "tokens": tokens, "texts": [t.text for t in translations]}


def measure(job: dict[str, Any]) -> dict[str, Any]:
    torch.set_num_threads(job["threads"])
    torch.set_num_interop_threads(1)
    sources = Path(job["sources"]).read_text(encoding="utf-8").splitlines()
    translator = load_engine(job)
    from seq2seq.config.search_settings import SearchSettings

    translator.translate(sources[:WARM_UP_SENTENCES], SearchSettings(beam_size=1))
    return {
        str(beam): timed_passes(translator, sources, beam, job["reps"]) for beam in job["beams"]
    }


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))))
