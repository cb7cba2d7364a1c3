"""The from-scratch transformer: one attention module (MHA, MQA, GQA; self and cross) inside encoder,
decoder and encoder-decoder blocks. Imports only torch, numpy and the standard library."""
