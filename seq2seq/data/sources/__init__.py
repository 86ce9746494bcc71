"""Where a run's sentence pairs come from: one registered source per `data.source.name`.

* `tabular`: a tab-separated corpus file, plain or a zip member (the manythings.org / Anki
  exports), fetched once and split by hashes into train, valid and test, with no sentence
  shared across splits (`data.kind=parallel` before `data.source`).
* `text_pair`: given train, valid and test files, one sentence a line,
  `<prefix>.<src_lang>` beside `<prefix>.<tgt_lang>`; the splits are the files'.
* `toy`: the copy and reverse tasks, generated in memory, with a known alignment.
* `hf`: a Hugging Face dataset, from the hub or saved on disk (`save_to_disk`, parquet), a
  column of language-code dicts or two text columns; the dataset's splits, or its training
  split split by hashes (`huggingface.py`; opening and checking the dataset:
  `hf_dataset.py`). Needs the `hf` extra (`datasets`), imported only to open one.

Each is a `DataSource` registered in the registry's "source" group (`seq2seq.data.sources
.base`) with the dataclass of its options, the keys of its node `data.source` beside
`name` (`TabularOptions`, `TextPairOptions`, `ToyOptions`, `HuggingFaceOptions`, declared
beside each class); `seq2seq.data.prepare.prepare` looks up the one `data.source` names,
and a user's plugin registers its own the same way. A source whose text is cleaned, cut
into subwords and cached on disk subclasses `CorpusSource`: it locates its corpus and
writes the split text files, and the shared pipeline does the rest.
"""

from seq2seq.data.sources.base import CorpusSource, DataSource, LocatedCorpus, data_source

__all__ = ["CorpusSource", "DataSource", "LocatedCorpus", "data_source"]
