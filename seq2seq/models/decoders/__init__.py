"""Decoders: recurrent (Bahdanau / Luong), convolutional (ConvS2S) and Transformer.

All three implement `seq2seq.models.base.Decoder` and take the attention as a factory
(`attention(query_dim=..., key_dim=..., value_dim=...)`), so every attention works with
every decoder.
"""

from seq2seq.models.decoders.cnn import CNNDecoder
from seq2seq.models.decoders.rnn import RNNDecoder
from seq2seq.models.decoders.transformer import TransformerDecoder

__all__ = ["CNNDecoder", "RNNDecoder", "TransformerDecoder"]
