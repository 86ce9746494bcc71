"""Word alignments from attention, in the Pharaoh format, scored by AER (Och & Ney 2003).

* `pharaoh`: read and write `i-j` link files (sure and possible links, 0- or 1-based);
* `words`: which word of its text each subword piece belongs to;
* `teacher_forced`: a model's teacher-forced attention, every layer and head;
* `extract`: word links from attention (layer, head or head mean, argmax or threshold);
* `head_choice`: the candidate layers × heads and head means, and the lowest AER among them;
* `gold`: the hand-aligned gold sets shipped in `gold/` (read in either direction);
* `model_aer`: a model's AER on the gold pairs, the one home of attention → links → counts
  (the formula itself is `seq2seq.metrics.aer`);
* `aer_hook`: the validation hook that logs `valid/aer` and chooses the head during training;
* `defaults`: which head a checkpoint aligns with by default (guided, chosen, last mean);
* `symmetric`: two directions' links or attention combined;
* `statistical`: a non-neural baseline (eflomal), symmetrised and scored on the gold set;
* `training_links`: the training split's word links (a file, a toy task's, eflomal's) moved
  onto its subword pieces, for guided alignment.
"""
