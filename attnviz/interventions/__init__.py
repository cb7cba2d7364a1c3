"""What a model does when it is changed or run on purpose: head ablation and the importance scan, minimal-pair
preferences, MHA/MQA/GQA measured side by side, MHA -> GQA conversion, greedy decoding with the KV cache."""
