"""Corpus pipeline: fetch, clean, split, subword, batch. Knows nothing of models.

One module per step, in pipeline order (`prepare.prepare(cfg)` runs them all):

* `config`    - `DataConfig`, every setting, validated
* `fetch`     - the corpus file from a mirror, an earlier copy or the web, with a manifest
* `corpus`    - tab-separated pairs, malformed lines skipped and counted, normalised
* `split`     - leakage-free train / valid / test by sentence-sharing groups
* `hashsplit` - the same split from 64-bit hashes in compact arrays (streaming prepare)
* `tokenizer` - sentencepiece subwords (cached by hash, bounded sample) and toy symbols
* `chunks`    - encoding in chunks, in worker processes for a large split
* `arrays`    - memory-mapped token arrays (ids + offsets) and lazy text lines
* `encode`    - ids of every split, cached on disk as arrays
* `batching`  - `ParallelData` (in memory, or lazy over arrays), `Batch`, `collate`,
  `TokenBatchSampler`
* `toy_tasks` - copy / reverse tasks with a known alignment
* `links`     - piece links of the training split (guided alignment), cached, batched
* `record`    - the record of a finished preparation, so a later start skips the corpus
* `sources`   - where the pairs come from, one registered source per `data.source`: a
  tab-separated file split by hashes, given text files, the toy tasks (or a plugin's)
* `prepare`   - the orchestration (looks up the source; the shared pipeline of a corpus
  source), returning `PreparedData`
* `synth`     - synthetic corpora of any size from a real one (`seq2seq-data synth`)
* `cli`       - `seq2seq-data prepare data=<name>`
"""
