"""Corpus pipeline: fetch, clean, split, subword, batch. Knows nothing of models.

One module per step, in pipeline order (`prepare.prepare(cfg)` runs them all):

* `config`    - `DataConfig`, every setting, validated
* `fetch`     - the corpus file from a mirror, an earlier copy or the web, with a manifest
* `corpus`    - tab-separated pairs, malformed lines skipped and counted, normalised
* `split`     - leakage-free train / valid / test by sentence-sharing groups
* `tokenizer` - sentencepiece subwords (cached by hash) and toy symbols, one API
* `encode`    - ids of every split, cached on disk
* `batching`  - `ParallelData`, `Batch`, `collate`, `TokenBatchSampler`
* `toy`       - copy / reverse tasks with a known alignment
* `prepare`   - the orchestration, returning `PreparedData`
* `cli`       - `seq2seq-data prepare data=<name>`
"""
