"""Word alignments from attention, in the Pharaoh format, scored by AER (Och & Ney 2003).

* `pharaoh`: read and write `i-j` link files (sure and possible links, 0- or 1-based);
* `aer`: precision, recall and alignment error rate of a corpus against gold links;
* `words`: which word of its text each subword piece belongs to;
* `attention`: a model's teacher-forced attention, every layer and head;
* `extract`: word links from attention (layer, head or head mean, argmax or threshold).
* `gold`: the hand-aligned gold sets shipped in `gold/` (read in either direction);
* `statistical`: a non-neural baseline (eflomal), symmetrised and scored on the gold set.
"""
