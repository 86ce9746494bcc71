"""`make bench-peer`: this project against JoeyNMT 2.3.0 and OpenNMT-py 3.5.1, measured back to
back on one machine (`--peers` chooses among them).

1. Peer environments (`peer_env`): `.peer/<peer>` (reused when it imports the peer at its
   version), else a new virtual environment with torch==2.13.0 installed FIRST (so that
   nothing pulls a CUDA build), then the peer's install steps: joeynmt==2.3.0,
   importlib_metadata and sentencepiece==0.2.1; or opennmt-py==3.5.1 without its
   dependencies (it declares torch<2.3) and then those it imports. torch must still be
   2.13.0 afterwards.
2. Same data (`data_export`): this project's prepared Tatoeba zh→en split (training pairs
   after its length filter, 8 dev pairs that are never validated, the first `sentences`
   test pairs) as plain text, and this project's two sentencepiece models with their piece
   lists as the peers' vocabulary files (OpenNMT-py's with our `<pad>` under its name,
   `onmt_config.write_onmt_vocab`).
3. Training (`processes`, `joey_runs`, `onmt_runs`), per reference shape
   (`transformer_small`, `gru_additive`): ours for `minutes`, then each peer with the same
   shape (`joey_config`, `onmt_config`) for as long, one directly after the other, all with
   `threads` torch threads, the same token budget per batch, no validation while the clock
   runs. Throughput (`throughput_logs`) is real (non-padding) target tokens per second as
   each framework logs it every `log_every` updates (ours: `metrics.jsonl`,
   `train/tokens_per_sec`; JoeyNMT: `Tokens per Sec` in `train.log`; OpenNMT-py: the target
   side of `S/T tok/s` on its console): the median of the intervals that end after
   `warmup_updates` updates. A peer is sent SIGINT `minutes` after its training loop starts
   (`timed_process`) and saves its weights.
4. Decoding (`ours`, `driver`, `onmt_driver`): each trained model translates the same test
   sentences greedy and with beam 5 (128 sentences a batch), timed without model loading,
   after a warm-up: sentences/s and generated target tokens/s (pieces + EOS of the 1-best
   output), median of `decode_reps` passes; BLEU by this project's scorer for all.
5. Time to quality (`quality_runs`, only with `--quality BLEU...`): per shape, each
   framework (ours, then each peer) trains again from scratch with the same settings for
   `quality_minutes` of its training clock (`quality_clock`: from the start of its training
   loop, stopped while a checkpoint is written), saving with its own saver at the first
   update boundary after every `quality_every` minutes and at the end (ours: fit() runs to
   each save time and continues; JoeyNMT and OpenNMT-py: their drivers save between two
   batches and end the run at the budget). Then, untimed, its own decoder translates the
   first `quality_sentences` valid pairs (exported as `quality.<src>`) greedily with every
   checkpoint, and our scorer gives each its BLEU (the checkpoints are then deleted). The
   time to a threshold is the clock of the first checkpoint at or above it
   (`time_to_quality`), exact to one save interval; not reached is `> budget`, and a ratio
   against it a bound.
6. A dated entry (`benchmark_entry`, `result_tables`): machine, matmul ceiling measured in
   this run, command, settings of every side, the differences that remain, tables with the
   ratios ours / each peer (for time to quality: the peer's minutes / ours).

`driver` (JoeyNMT) and `onmt_driver` (OpenNMT-py) are the modules the peer environments'
Python runs (by file path, as those environments do not have this package): they import
only the standard library at their top level (and `quality_clock` beside them; `onmt_driver`
also `driver`), and
the peer and torch inside the functions that use them. The other modules' names are chosen
not to shadow a top-level module that a peer's dependencies import, since the drivers'
folder comes first on that Python's import path.
"""
