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

# The piece between the sentences of a pseudo-document (`seq2seq.data.documents`): a
# sentencepiece user-defined symbol, so always one piece, when data.documents is set.
SEP_PIECE = "<sep>"
# Its id: sentencepiece numbers the user-defined symbols right after the four above, so a
# model finds the separator without its tokeniser (`seq2seq.data.documents` checks it).
SEP_ID = 4
