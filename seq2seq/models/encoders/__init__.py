"""Encoders: embedded source tokens and their mask in, `EncoderOutput` out.

* `RNNEncoder`: (bi)directional Elman RNN / LSTM / GRU (Bahdanau et al. 2015).
* `CNNEncoder`: convolutions with gated linear units (Gehring et al. 2017).
* `TransformerEncoder`: pre-layer-norm self-attention blocks (Vaswani et al. 2017).
"""

from seq2seq.models.encoders.cnn import CNNEncoder
from seq2seq.models.encoders.rnn import RNNEncoder
from seq2seq.models.encoders.transformer import TransformerEncoder

__all__ = ["CNNEncoder", "RNNEncoder", "TransformerEncoder"]
