"""What the Llama-shaped decoders share (Llama, Mistral, Qwen2/3, OLMo 2, SmolLM3, Gemma, Mixtral, gpt-oss,
Phi-3): per-layer windows from HF's `layer_types`, and the tensor moves of a q/k/v/o + gate/up/down decoder
with optional biases and q/k norms, its block norms, final norm and unembedding. A family whose attention
or MLP is stored otherwise (fused, experts, sinks) passes its own move for that part."""

from __future__ import annotations

from attnviz.loading.ledger import WeightLedger

PRE_NORMS = (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "mlp_norm"))  # Llama's pre-norms


def decoder_sizes(hf: dict) -> dict:
    """The ModelConfig sizes a decoder's HF config names under Llama's keys (GPT-NeoX and Phi use them too),
    with what every such decoder sets: causal, no position table (rotary), an unembedding."""
    n_heads = hf["num_attention_heads"]
    return dict(vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_layers=hf["num_hidden_layers"],
                n_heads=n_heads, n_kv_heads=hf.get("num_key_value_heads") or n_heads, d_ff=hf["intermediate_size"],
                causal=True, max_positions=None, lm_head=True)


def layer_windows(hf: dict, layer_types: list[str] | None) -> tuple[int | None, ...] | None:
    """Each layer's window from HF's layer_types ("sliding_attention" layers get `sliding_window`; HF
    picks each layer's mask by its type), or None when every layer attends fully."""
    if not layer_types:
        return None
    model_type = hf["model_type"]
    if len(layer_types) != hf["num_hidden_layers"]:
        raise ValueError(f"{model_type} layer_types has {len(layer_types)} entries for "
                         f"{hf['num_hidden_layers']} layers")
    unknown = set(layer_types) - {"sliding_attention", "full_attention"}
    if unknown:
        raise ValueError(f"{model_type} layer_types {sorted(unknown)} are not supported")
    if "sliding_attention" not in layer_types:
        return None
    window = hf.get("sliding_window")
    if not window:
        raise ValueError(f"{model_type} has sliding_attention layers but no sliding_window")
    return tuple(window if kind == "sliding_attention" else None for kind in layer_types)


def move_attention(w: WeightLedger, layer: str, ours: str, c) -> None:
    """self_attn.{q,k,v,o}_proj (with the biases the config asks for) and the q/k norms, if any."""
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        w.move(f"{layer}self_attn.{name}.weight", f"{ours}attn.{name}.weight")
        if c.out_bias if name == "o_proj" else c.qkv_bias:
            w.move(f"{layer}self_attn.{name}.bias", f"{ours}attn.{name}.bias")
    if c.qk_norm is not None:
        w.move(f"{layer}self_attn.q_norm.weight", f"{ours}attn.q_norm.weight")
        w.move(f"{layer}self_attn.k_norm.weight", f"{ours}attn.k_norm.weight")


def move_gated_mlp(w: WeightLedger, layer: str, ours: str, c) -> None:
    """mlp.{gate,up,down}_proj, with biases where the config has them."""
    for name in ("gate_proj", "up_proj", "down_proj"):
        w.move(f"{layer}mlp.{name}.weight", f"{ours}mlp.{name}.weight")
        if c.mlp_bias:
            w.move(f"{layer}mlp.{name}.bias", f"{ours}mlp.{name}.bias")


def convert_decoder(w: WeightLedger, model, norms=PRE_NORMS, attention=move_attention, mlp=move_gated_mlp) -> dict:
    """A Llama-shaped decoder's tensors (under `w`'s prefix) -> ours: the embedding, each layer's attention
    and MLP (`attention`, `mlp`: (ledger, HF layer prefix, our block prefix, config), for families that store
    them otherwise) and block norms (`norms`: (HF name, our name) pairs), the final norm, the unembedding."""
    c = model.config
    w.move("embed_tokens.weight", "token_embedding.weight")
    for i in range(c.n_layers):
        layer, ours = f"layers.{i}.", f"blocks.{i}."
        attention(w, layer, ours, c)
        mlp(w, layer, ours, c)
        for theirs, mine in norms:
            w.move(f"{layer}{theirs}.weight", f"{ours}{mine}.weight")
    w.move("norm.weight", "final_norm.weight")
    w.unembedding(c.tie_word_embeddings)
    w.ignore(r".*rotary_emb\.(\w+_)?inv_freq")  # recomputed from the config (Phi-3 saves long_ and short_ too)
    return w.finish(model)


def convert_llama_like(hf: dict, checkpoint: dict, model) -> dict:
    """A Llama-shaped checkpoint under model.* with Llama's pre-norms (Llama, Mistral, Qwen2, Qwen3, SmolLM3)."""
    return convert_decoder(WeightLedger(checkpoint, "model."), model)
