"""Benchmarks and diagnostics: what `make bench`, `make bench-peer`, `make bench-data` and the
GPU check measure, as library functions (scripts/ holds only their command lines).

* `entry`: the dated benchmark log (tools/bench/LOG.md) entry (machine lines, paths shown without a machine's
  folders, adding it at the top of the file's history);
* `ceiling`: the float32 matmul ceiling, the denominator of MFU;
* `presets`: composing a preset's training config as `seq2seq-train` does;
* `training_speed`: timing the Trainer's own updates on the first batches of epoch 0;
* `worker`: one preset's measurement in a fresh process (its own peak RSS);
* `throughput`: `make bench`'s training and dropout tables;
* `decoding_speed`: sentences/s of greedy and beam search on the test split;
* `quality`: time (and training TFLOP) to quality from a run's TensorBoard events;
* `speed`: the `make bench` entry, composed of the sections above;
* `process_memory`, `data_scale`: `make bench-data` (preparation and start-up at scale);
* `peer`: `make bench-peer`, this project against JoeyNMT;
* `gpu`: the GPU section (throughput, MFU against the GPU's bf16 peak, memory);
* `guidance`: the cost of guided alignment per update;
* `levers`: variants of `make train`'s model trained for the same compute;
* `attention_diagnostics`: attention entropy, saturation, score scale and gate biases.
"""
