"""Word alignments from attention, in the Pharaoh format, scored by AER (Och & Ney 2003).

* `pharaoh`: read and write `i-j` link files (sure and possible links, 0- or 1-based);
* `aer`: precision, recall and alignment error rate of a corpus against gold links;
* `words`: which word of its text each subword piece belongs to;
* `attention`: a model's teacher-forced attention, every layer and head;
* `extract`: word links from attention (layer, head or head mean, argmax or threshold).
* `heads`: every layer × head and head mean scored on gold links, the lowest AER chosen;
* `defaults`: which head a checkpoint aligns with by default (guided, chosen, last mean);
* `gold`: the hand-aligned gold sets shipped in `gold/` (read in either direction);
* `statistical`: a non-neural baseline (eflomal), symmetrised and scored on the gold set;
* `guidance`: the training split's word links (a file, a toy task's, eflomal's) moved onto
  its subword pieces, for guided alignment.
"""
