"""`make bench-peer`: this project against JoeyNMT 2.3.0, measured back to back on one machine.

1. Peer environment (`peer_env`): `.peer/joeynmt` (reused when it imports joeynmt 2.3.0),
   else a new virtual environment with torch==2.13.0 installed FIRST (so that nothing pulls
   a CUDA build), then joeynmt==2.3.0, importlib_metadata and sentencepiece==0.2.1; torch
   must still be 2.13.0 afterwards.
2. Same data (`data_export`): this project's prepared Tatoeba zh→en split (training pairs
   after its length filter, 8 dev pairs that are never validated, the first `sentences`
   test pairs) as plain text, and this project's two sentencepiece models with their piece
   lists as JoeyNMT's vocabulary files.
3. Training (`processes`), per reference shape (`transformer_small`, `gru_additive`): ours
   for `minutes`, then JoeyNMT with the same shape (`joey_config`) for as long, one directly
   after the other, both with `threads` torch threads, the same token budget per batch, no
   validation while the clock runs. Throughput (`throughput_logs`) is real (non-padding)
   target tokens per second as each framework logs it every `log_every` updates (ours:
   `metrics.jsonl`, `train/tokens_per_sec`; JoeyNMT: `Tokens per Sec` in `train.log`: the
   non-pad target tokens of the interval over its time, validation time excluded): the
   median of the intervals that end after `warmup_updates` updates.
4. Decoding (`ours`, `driver`): each trained model translates the same test sentences
   greedy and with beam 5 (128 sentences a batch), timed without model loading, after a
   warm-up: sentences/s and generated target tokens/s (pieces + EOS of the 1-best output),
   median of `decode_reps` passes; BLEU by this project's scorer for both.
5. A dated entry (`benchmark_entry`, `result_tables`): machine, matmul ceiling measured in
   this run, command, settings of both sides, the differences that remain, tables, ratios.

`driver` is the one module the peer environment's Python runs (by its file path, as that
environment does not have this package): it imports only the standard library at its top
level, and JoeyNMT and torch inside the functions that use them. The other modules' names
are chosen not to shadow a top-level module that JoeyNMT's dependencies import, since the
driver's folder comes first on that Python's import path.
"""
