"""The attention kinds measured side by side for the Learn page: MHA, MQA and GQA on attnviz's own module
(`variants`), the KV cache's bytes of each kind and MLA (`latent_kv`), MHA -> GQA by mean-pooling K/V heads
(`gqa_conversion`), greedy decoding with and without the KV cache (`decoding`)."""
