"""Ids of the special tokens, shared by the tokenisers and the models.

sentencepiece models are trained with exactly these ids, and the toy vocabularies use
them too, so a model never needs to ask a tokeniser which id is padding.
"""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3

PAD_PIECE = "<pad>"
UNK_PIECE = "<unk>"
BOS_PIECE = "<s>"
EOS_PIECE = "</s>"
