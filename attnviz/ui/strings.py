"""Every UI string, in English and Chinese, from one table. `t(key, **values)` picks the language
chosen in the sidebar; a key missing from a language falls back to English."""

from __future__ import annotations

LANGUAGES = {"en": "English", "zh": "中文"}

STRINGS: dict[str, dict[str, str]] = {
    "app_title": {"en": "attnviz: where does each head look?", "zh": "attnviz：每个注意力头在看哪里？"},
    "app_caption": {
        "en": "Every layer and head of a real pretrained transformer, computed by attnviz's own from-scratch "
              "multi-head attention and checked against Hugging Face to 1e-5.",
        "zh": "真实预训练 Transformer 的每一层、每一个头，由 attnviz 自己从零实现的多头注意力计算，"
              "并与 Hugging Face 对齐到 1e-5。",
    },
    "detectors_title": {"en": "Head detectors: previous-token, duplicate-token, induction",
                        "zh": "注意力头检测：前一词元头、重复词元头、归纳头"},
    "detectors_caption": {
        "en": "On 4 sequences of 50 random tokens repeated twice (Olsson et al. 2022; the definition of "
              "`python -m attnviz heads`): previous-token = mean attention from each token to the one before; "
              "duplicate-token = from each token of the second copy to the same token in the first; induction "
              "= to the token after that one (what came next last time). Scores join the head profile.",
        "zh": "在 4 条由 50 个随机词元重复两次组成的序列上计算（Olsson 等 2022；与 `python -m attnviz heads` 的定义"
              "相同）：前一词元分数 = 每个词元对前一个词元的平均注意力；重复词元分数 = 第二遍中每个词元对第一遍中"
              "同一词元的注意力；归纳分数 = 对其后一个词元（上次接下来出现的词元）的注意力。分数也会加入注意力头概况。",
    },
    "detectors_run": {"en": "Find these heads (a few seconds to a minute)", "zh": "查找这些注意力头（数秒到一分钟）"},
    "detectors_progress": {"en": "Running sequence {done} of {total}", "zh": "正在运行第 {done} / {total} 条序列"},
    "detector_previous_token": {"en": "previous-token", "zh": "前一词元"},
    "detector_duplicate_token": {"en": "duplicate-token", "zh": "重复词元"},
    "detector_induction": {"en": "induction", "zh": "归纳"},
    "column_token": {"en": "token", "zh": "词元"},
    "column_probability": {"en": "probability", "zh": "概率"},
    "page_explore": {"en": "Explore", "zh": "探索"},
    "page_head_finder": {"en": "Head Finder", "zh": "注意力头查找器"},
    "page_learn": {"en": "Learn", "zh": "学习"},
    # Translate page (ui/translate.py): an encoder-decoder's three attention kinds
    "page_translate": {"en": "Translate", "zh": "翻译"},
    "translate_title": {"en": "Translate: encoder, decoder and cross-attention",
                        "zh": "翻译：编码器、解码器与交叉注意力"},
    "translate_caption": {
        "en": "An encoder-decoder transformer of the original Transformer's shape (Marian / opus-mt: 512 wide, "
              "8 heads of 64, 6 + 6 layers, swish), run by attnviz's own attention module. The encoder reads the "
              "source, the decoder reads the target so far (causal), and cross-attention lets each target "
              "position read the source: decoder queries, encoder keys and values.",
        "zh": "与原始 Transformer 同形的编码器-解码器"
              "（Marian / opus-mt：宽 512，8 个 64 维的头，6 + 6 层，swish 激活），"
              "由 attnviz 自己的注意力模块计算。编码器读源文本，解码器读到目前为止的目标文本（因果），"
              "交叉注意力让每个目标位置读源文本：查询来自解码器，键和值来自编码器。",
    },
    "translate_model": {"en": "Translation model", "zh": "翻译模型"},
    "translate_model_custom": {"en": "Other Marian model (hub id)", "zh": "其他 Marian 模型（hub id）"},
    "translate_model_custom_help": {
        "en": "A Helsinki-NLP opus-mt model id, e.g. Helsinki-NLP/opus-mt-en-de (needs the network).",
        "zh": "Helsinki-NLP opus-mt 模型的 id，例如 Helsinki-NLP/opus-mt-en-de（需要网络）。",
    },
    "translate_random": {"en": "random Marian-sized translation model (untrained)",
                         "zh": "随机初始化的 Marian 规模翻译模型（未训练）"},
    "translate_untrained": {
        "en": "This model is untrained (random weights, built offline): its “translation” is noise, and its "
              "attention shows the mechanics (shapes, the causal mask, cross-attention from target to source), not "
              "learned alignments. Choose a Helsinki-NLP opus-mt model for real translations.",
        "zh": "该模型未经训练（随机权重，离线构建）：它的“译文”是噪声，其注意力只展示机制（形状、因果遮蔽、"
              "从目标到源的交叉注意力），而非学到的对齐。要看真实的翻译，请选择 Helsinki-NLP opus-mt 模型。",
    },
    "translate_not_seq2seq": {
        "en": "{name} is not a translation (encoder-decoder) model; this page takes Marian (opus-mt) models.",
        "zh": "{name} 不是翻译（编码器-解码器）模型；此页面接受 Marian（opus-mt）模型。",
    },
    "translate_fallback": {"en": "Showing the untrained offline translation model instead.",
                           "zh": "改为显示离线的未训练翻译模型。"},
    "translate_facts": {
        "en": "{name}: d_model {d}, {heads} heads, {enc} encoder + {dec} decoder layers, {params:.1f}M parameters.",
        "zh": "{name}：d_model {d}，{heads} 个头，{enc} 层编码器 + {dec} 层解码器，{params:.1f}M 参数。",
    },
    "translate_language": {"en": "Target language token", "zh": "目标语言标记"},
    "translate_language_help": {
        "en": "This model translates into several languages and reads the one wanted from a token put in front "
              "of the source, e.g. >>cmn_Hans<< for simplified Chinese.",
        "zh": "该模型可译成多种语言，由放在源文本前面的标记选择目标语言，例如 >>cmn_Hans<< 表示简体中文。",
    },
    "translate_source": {"en": "Source text", "zh": "源文本"},
    "translate_target": {"en": "Target text", "zh": "目标文本"},
    "translate_target_help": {
        "en": "Optional: a translation whose attention to read (the decoder reads it, teacher forcing). Empty: the "
              "model's own greedy translation.",
        "zh": "可选：要查看其注意力的译文（解码器读入它，即教师强制）。留空：使用模型自己的贪心解码译文。",
    },
    "translate_empty": {"en": "Type a source sentence.", "zh": "请输入源句子。"},
    "translate_running": {"en": "Translating…", "zh": "正在翻译…"},
    "translate_error": {"en": "Could not run this text: {error}", "zh": "无法运行这段文本：{error}"},
    "translate_output_generated": {"en": "Translation (greedy decoding)", "zh": "译文（贪心解码）"},
    "translate_output_given": {"en": "Target text (given; the decoder reads it)",
                               "zh": "目标文本（给定；由解码器读入）"},
    "translate_output_empty": {"en": "(empty: the model ended at once)", "zh": "（空：模型立即结束）"},
    "translate_tokens": {"en": "{s} source tokens, {t} decoder positions", "zh": "{s} 个源词元，{t} 个解码器位置"},
    "translate_truncated": {"en": "cut at {n} tokens", "zh": "已截断为 {n} 个词元"},
    "translate_kind": {"en": "Attention kind", "zh": "注意力类型"},
    "translate_kind_encoder": {"en": "Encoder self-attention", "zh": "编码器自注意力"},
    "translate_kind_decoder": {"en": "Decoder self-attention", "zh": "解码器自注意力"},
    "translate_kind_cross": {"en": "Cross-attention", "zh": "交叉注意力"},
    "translate_kind_caption_encoder": {
        "en": "Source to source: every source token sees every source token (rows: queries, columns: keys).",
        "zh": "源到源：每个源词元都能看到所有源词元（行：查询，列：键）。",
    },
    "translate_kind_caption_decoder": {
        "en": "Target to earlier target: position t sees positions up to t only (the causal mask). The first "
              "position is the decoder start token <pad>, then the target shifted right.",
        "zh": "目标到之前的目标：位置 t 只能看到 t 及之前的位置（因果遮蔽）。第一个位置是解码器起始标记 <pad>，"
              "其后是右移一位的目标文本。",
    },
    "translate_kind_caption_cross": {
        "en": "Target to source: rows are decoder positions (each reads the token shown and predicts the next), "
              "columns are source tokens. T and S differ.",
        "zh": "目标到源：行是解码器位置（每个位置读入所示词元并预测下一个），列是源词元。T 与 S 不同。",
    },
    "translate_pick_below": {"en": "pick this layer and head below", "zh": "在下方选择该层和头"},
    "translate_layer": {"en": "Layer of this kind", "zh": "该类型的层"},
    "translate_head": {"en": "Head of that layer", "zh": "该层的头"},
    "translate_alignment_title": {"en": "Cross-attention as a word alignment", "zh": "把交叉注意力读作词对齐"},
    "translate_alignment_mean": {"en": "Mean of all heads", "zh": "所有头的平均"},
    "translate_alignment_all_heads": {"en": "mean of the heads", "zh": "各头平均"},
    "translate_alignment_one_head": {"en": "head {head}", "zh": "第 {head} 个头"},
    "translate_alignment_caption": {
        "en": "Layer {layer}, {which}: the weight from each target word to each source word (the mean over the "
              "decoder steps that produce the word of the summed weight on the source word's tokens), and the "
              "source word each target word weighs most.",
        "zh": "第 {layer} 层，{which}：每个目标词对每个源词的权重（在生成该目标词的解码步骤上取平均，"
              "对源词的各词元求和），以及每个目标词权重最大的源词。",
    },
    "translate_alignment_none": {"en": "No word on one of the sides.", "zh": "某一侧没有词。"},
    "translate_column_target": {"en": "target word", "zh": "目标词"},
    "translate_column_source": {"en": "source word", "zh": "源词"},
    "translate_column_weight": {"en": "weight", "zh": "权重"},
    "model": {"en": "Model", "zh": "模型"},
    "model_preset": {"en": "Preset", "zh": "预设模型"},
    "random_model": {"en": "random BERT-base-sized model (untrained)", "zh": "随机 BERT-base 规模模型（未训练）"},
    "model_custom": {"en": "Other: a hub id (name or owner/name)", "zh": "其他：Hub ID（名称或 所有者/名称）"},
    "model_custom_help": {
        "en": "e.g. bert-base-cased or FacebookAI/roberta-base. A local folder or .gguf file works only under a "
              "directory the app's operator allows (ATTNVIZ_MODEL_DIRS). Leave empty to use the preset.",
        "zh": "例如 bert-base-cased 或 FacebookAI/roberta-base。本地目录或 .gguf 文件仅在应用管理员允许的目录"
              "（ATTNVIZ_MODEL_DIRS）下可用。留空则使用预设。",
    },
    "source_refused": {
        "en": "This is not a model the app can load: choose a preset, or type a hub id (name or owner/name). "
              "Local folders and .gguf files are accepted only under directories the app's operator allows.",
        "zh": "应用无法加载该模型：请选择预设，或输入 Hub ID（name 或 owner/name）。"
              "本地目录和 .gguf 文件仅在应用管理员允许的目录下可用。",
    },
    "hub_failed": {
        "en": "Could not get {name} from the Hugging Face hub: check the id, or the hub is not reachable from "
              "this server.",
        "zh": "无法从 Hugging Face Hub 获取 {name}：请检查 ID，或该服务器无法访问 Hub。",
    },
    "over_budget": {
        "en": "{name} does not fit this server's memory budget: it needs about {need:.2f} GB, the budget is "
              "{budget:.1f} GB and {used:.2f} GB is in use. Choose a smaller model.",
        "zh": "{name} 超出该服务器的内存预算：约需 {need:.2f} GB，预算为 {budget:.1f} GB，已使用 {used:.2f} GB。"
              "请选择更小的模型。",
    },
    "trace_over_budget": {
        "en": "This input does not fit the server's memory budget right now (it needs about {need:.2f} GB; "
              "budget {budget:.1f} GB, {used:.2f} GB in use). Try a shorter text, or again in a moment.",
        "zh": "该输入目前超出服务器的内存预算（约需 {need:.2f} GB；预算 {budget:.1f} GB，已使用 {used:.2f} GB）。"
              "请尝试更短的文本，或稍后再试。",
    },
    "unexpected_error": {"en": "Something went wrong on the server while drawing this part. It has been logged; "
                                "try another input or reload the page.",
                         "zh": "服务器在绘制这一部分时出错，已记录日志；请尝试其他输入或重新加载页面。"},
    "busy": {"en": "You already have a long task running; wait for it to finish.",
             "zh": "你已有一个耗时任务在运行，请等待其完成。"},
    "waiting_slot": {"en": "Waiting for the server: another visitor's long task is running…",
                     "zh": "正在等待服务器：另一位访问者的耗时任务正在运行…"},
    "cancel": {"en": "Cancel", "zh": "取消"},
    "loading_model": {"en": "Loading {name}", "zh": "正在加载 {name}"},
    "model_failed": {"en": "Could not load {name}: {error}", "zh": "无法加载 {name}：{error}"},
    "seq2seq_elsewhere": {"en": "{name} is a translation (encoder-decoder) model: open it on the Translate page.",
                          "zh": "{name} 是翻译（编码器-解码器）模型：请在“翻译”页面中打开。"},
    "retry": {"en": "Try loading it again", "zh": "重新尝试加载"},
    "offline_note": {
        "en": "{name} is loaded from its package-index copy: real pretrained weights, no model hub needed.",
        "zh": "{name} 从软件包索引中的副本加载：真实预训练权重，无需连接模型 Hub。",
    },
    "fallback_note": {
        "en": "Showing {name} instead, a pretrained model installed from the package index.",
        "zh": "改为显示 {name}，这是从软件包索引安装的预训练模型。",
    },
    "random_warning": {
        "en": "No pretrained model could be loaded: falling back to a random model. Install the offline "
              "models (see README) or connect to the model hub.",
        "zh": "无法加载任何预训练模型：改用随机模型。请安装离线模型（见 README）或连接模型 Hub。",
    },
    "random_note": {
        "en": "This is a RANDOMLY INITIALISED, untrained model: its attention patterns mean nothing "
              "linguistically.",
        "zh": "这是随机初始化、未经训练的模型：其注意力模式没有语言学意义。",
    },
    "too_large": {
        "en": "{name} needs about {need:.1f} GB to load, but only {free:.1f} GB is left in this server's memory "
              "budget. Choose a smaller model.",
        "zh": "{name} 加载约需 {need:.1f} GB 内存，但该服务器的内存预算只剩 {free:.1f} GB。请选择更小的模型。",
    },
    "facts": {
        "en": "{family} · {layers} layers × {heads} heads ({kind}, {kv} KV heads) · {params} parameters · "
              "{device} · {dtype}",
        "zh": "{family} · {layers} 层 × {heads} 头（{kind}，{kv} 个 KV 头）· {params} 参数 · {device} · {dtype}",
    },
    "language": {"en": "Language", "zh": "语言"},
    "sentence": {"en": "Sentence", "zh": "句子"},
    "sentence_b": {"en": "Sentence B", "zh": "句子 B"},
    "sentence_b_help": {
        "en": "Optional second sentence (encoder models): BERT sees [CLS] A [SEP] B [SEP].",
        "zh": "可选的第二个句子（编码器模型）：BERT 输入为 [CLS] A [SEP] B [SEP]。",
    },
    "examples": {"en": "Examples", "zh": "示例"},
    "empty_text": {"en": "Type a sentence to see its attention.", "zh": "请输入一个句子来查看注意力。"},
    "run_failed": {"en": "Could not run the model on this text: {error}", "zh": "无法在该文本上运行模型：{error}"},
    "truncated": {
        "en": "The input is longer than {n} tokens: only the first {n} are shown.",
        "zh": "输入超过 {n} 个词元：只显示前 {n} 个。",
    },
    "many_unk": {
        "en": "{share:.0%} of the tokens are unknown ({unk}): this vocabulary does not cover the script. "
              "Try {suggestion}.",
        "zh": "{share:.0%} 的词元是未知词（{unk}）：该词表不覆盖这种文字。请尝试 {suggestion}。",
    },
    "tokens": {"en": "Tokens", "zh": "词元"},
    "no_words": {"en": "The text has no words to show at word level.", "zh": "该文本在词粒度下没有可显示的词。"},
    "level": {"en": "Level", "zh": "粒度"},
    "level_token": {"en": "tokens", "zh": "词元"},
    "level_word": {"en": "words", "zh": "词"},
    "hide_special": {"en": "Hide special tokens", "zh": "隐藏特殊词元"},
    "hide_special_help": {"en": "Drop [CLS]/[SEP]/BOS rows and columns and renormalise each row over the "
                                "remaining tokens.",
                          "zh": "去掉 [CLS]/[SEP]/BOS 的行和列，并在其余词元上重新归一化每一行。"},
    "hide_special_word_level": {"en": "Not at word level: special tokens belong to no word, so words never show "
                                      "them.",
                                "zh": "词粒度下不可用：特殊词元不属于任何词，词视图本就不显示它们。"},
    "hide_special_none": {"en": "This input has no special tokens (this tokenizer adds none).",
                          "zh": "该输入没有特殊词元（该分词器不添加特殊词元）。"},
    "sentence_b_dropped": {"en": "Sentence B is not used: a decoder reads one text. It comes back with an "
                                 "encoder model.",
                           "zh": "未使用句子 B：解码器只读取一段文本。切换回编码器模型时会恢复。"},
    "scale": {"en": "Colour scale", "zh": "颜色刻度"},
    "scale_linear": {"en": "linear", "zh": "线性"},
    "scale_power": {"en": "power", "zh": "幂"},
    "scale_log": {"en": "log", "zh": "对数"},
    "palette": {"en": "Palette", "zh": "配色"},
    "palette_default": {"en": "default", "zh": "默认"},
    "palette_colorblind": {"en": "colorblind", "zh": "色盲友好"},
    "palette_blues": {"en": "blues", "zh": "蓝色"},
    "model_view": {"en": "All heads", "zh": "所有注意力头"},
    "model_view_caption": {
        "en": "Rows: layers; columns: heads; each tile is one head's attention (rows attend to columns). "
              "The last row and column are means.",
        "zh": "行：层；列：头；每个小块是一个头的注意力（行关注列）。最后一行和一列是平均值。",
    },
    "pooled": {
        "en": "Long input: each tile is pooled to {cells} × {cells} cells. A cell is the mean, over the query "
              "tokens of its block, of the weight they give the key tokens of its block, so every row still "
              "sums to 1 and sharp patterns stay bright. The head detail below shows single tokens, up to 96 "
              "at a time.",
        "zh": "输入较长：每个小块被池化为 {cells} × {cells}。每个格子是其块内各查询词元分给该块键词元的权重之和的平均，"
              "因此每行之和仍为 1，清晰的模式依然明亮。下方单头视图显示单个词元，每次最多 96 个。",
    },
    "head_detail": {"en": "One head", "zh": "单个注意力头"},
    "layer": {"en": "Layer", "zh": "层"},
    "head": {"en": "Head", "zh": "头"},
    "threshold": {"en": "Hide lines below", "zh": "隐藏低于该值的连线"},
    "focus_token": {"en": "Isolate the lines of", "zh": "只显示该词元的连线"},
    "all_tokens": {"en": "(all tokens)", "zh": "（所有词元）"},
    "pair_filter": {"en": "Sentence filter", "zh": "句子筛选"},
    "pair_filter_help": {
        "en": "As bertviz: which sentence the rows (from, queries) and columns (to, keys) come from. [CLS] and "
              "the first [SEP] count with sentence A, the last [SEP] with B. Weights are not renormalised.",
        "zh": "与 `bertviz` 相同：行（来源，查询）与列（目标，键）各取自哪个句子。[CLS] 和第一个 [SEP] 归入句子 A，"
              "最后一个 [SEP] 归入句子 B。权重不重新归一化。",
    },
    "pair_all": {"en": "All", "zh": "全部"},
    "pair_ab": {"en": "A → B", "zh": "A → B"},
    "pair_ba": {"en": "B → A", "zh": "B → A"},
    "pair_aa": {"en": "A → A", "zh": "A → A"},
    "pair_bb": {"en": "B → B", "zh": "B → B"},
    "pair_lines": {"en": "Line direction", "zh": "连线方向"},
    "pair_lines_help": {
        "en": "For the isolated token: the lines from it (what it attends to), to it (what attends to it), "
              "or both (incoming in green).",
        "zh": "针对被单独显示的词元：从它出发的连线（它关注什么）、指向它的连线（什么关注它），"
              "或两者（指向它的为绿色）。",
    },
    "pair_lines_out": {"en": "from the token", "zh": "从该词元出发"},
    "pair_lines_in": {"en": "to the token", "zh": "指向该词元"},
    "pair_lines_both": {"en": "both", "zh": "两者"},
    "pair_focus_outside": {"en": "The isolated token has no lines in this direction under the sentence filter.",
                           "zh": "在当前句子筛选下，被单独显示的词元在该方向上没有连线。"},
    "pair_empty": {"en": "The tokens shown hold no rows or no columns for this sentence filter.",
                   "zh": "当前显示的词元中，该句子筛选下没有行或没有列。"},
    "kv_note": {
        "en": "Head {head} shares KV head {kv} with heads {peers} ({kind}).",
        "zh": "第 {head} 个头与 {peers} 号头共享第 {kv} 个 KV 头（{kind}）。",
    },
    "profile": {"en": "Head profile (over all tokens of this sentence)", "zh": "注意力头概况（基于本句所有词元）"},
    "profile_entropy": {"en": "entropy (nats)", "zh": "熵（nats）"},
    "profile_special": {"en": "[CLS]/[SEP]/BOS", "zh": "[CLS]/[SEP]/BOS"},
    "profile_distance": {"en": "mean distance", "zh": "平均距离"},
    "profile_confidence": {"en": "confidence (mean max)", "zh": "置信度（平均最大值）"},
    "profile_previous": {"en": "→ previous", "zh": "→ 前一个"},
    "profile_next": {"en": "→ next", "zh": "→ 后一个"},
    "profile_self": {"en": "→ self", "zh": "→ 自身"},
    "profile_punctuation": {"en": "→ punctuation", "zh": "→ 标点"},
    "profile_positional": {"en": "positional", "zh": "位置型"},
    "positional_yes": {"en": "yes, offset {offset}", "zh": "是，偏移 {offset}"},
    "positional_no": {"en": "no", "zh": "否"},
    "token_focus": {"en": "Which heads link two words?", "zh": "哪些头连接这两个词？"},
    "source_word": {"en": "From word", "zh": "源词"},
    "target_word": {"en": "To word", "zh": "目标词"},
    "top_heads": {"en": "Heads ranked by attention from *{source}* to *{target}*",
                  "zh": "按 *{source}* → *{target}* 注意力排序的头"},
    "same_word": {"en": "Pick two different words.", "zh": "请选择两个不同的词。"},
    "column_layer": {"en": "layer", "zh": "层"},
    "column_head": {"en": "head", "zh": "头"},
    "column_attention": {"en": "attention", "zh": "注意力"},
    "predictions": {"en": "Next-token predictions", "zh": "下一个词元预测"},
    "position": {"en": "After token", "zh": "在该词元之后"},
    "parity": {"en": "Check parity with Hugging Face", "zh": "与 Hugging Face 对比"},
    "parity_result": {
        "en": "max |Δ attention| = {attn:.1e} (bound 1e-5), max |Δ hidden| = {hidden:.1e} (bound 1e-4) on "
              "{n} tokens",
        "zh": "最大 |Δ 注意力| = {attn:.1e}（上限 1e-5），最大 |Δ 隐状态| = {hidden:.1e}（上限 1e-4），共 {n} 个词元",
    },
    "parity_running": {"en": "Loading Hugging Face's own model for the comparison…",
                       "zh": "正在加载 Hugging Face 的模型以进行对比…"},
    "stage_downloading": {"en": "downloading {name}", "zh": "正在下载 {name}"},
    "stage_reading_config": {"en": "reading config", "zh": "正在读取配置"},
    "stage_reading_weights": {"en": "reading weights", "zh": "正在读取权重"},
    "stage_reading_tokenizer": {"en": "reading tokenizer", "zh": "正在读取分词器"},
    "stage_reading_gguf_config": {"en": "reading GGUF config", "zh": "正在读取 GGUF 配置"},
    "stage_dequantizing": {"en": "dequantizing GGUF weights", "zh": "正在反量化 GGUF 权重"},
    "stage_converting": {"en": "converting weights", "zh": "正在转换权重"},
    "stage_ready": {"en": "ready", "zh": "就绪"},
    "stage_reference": {"en": "loading the Hugging Face reference of {name}",
                        "zh": "正在加载 {name} 的 Hugging Face 参照模型"},
    "parity_comparing": {"en": "Comparing the attentions…", "zh": "正在对比注意力…"},
    "parity_done": {"en": "Compared with Hugging Face", "zh": "已与 Hugging Face 对比"},
    "window": {"en": "First token shown", "zh": "显示的第一个词元"},
    "window_help": {"en": "Long input: the head detail shows {n} tokens at a time (the same tokens as rows and "
                          "columns). The mosaic above shows all of them.",
                    "zh": "输入较长：单头视图每次显示 {n} 个词元（行与列相同）。上方的总览显示全部词元。"},
    "parity_failed": {"en": "Parity check unavailable: {error}", "zh": "无法进行对比：{error}"},
    "download_npz": {"en": "Trace (NPZ, full precision)", "zh": "完整数据（NPZ，全精度）"},
    "download_json": {"en": "Trace (JSON, 4 decimals)", "zh": "完整数据（JSON，4 位小数）"},
    "download_csv": {"en": "This head (CSV)", "zh": "当前头（CSV）"},
    "share": {"en": "The URL holds the whole view (model, sentences, level, scale, palette, layer, head, "
                    "threshold): copy it to share this view.",
              "zh": "网址中包含整个视图（模型、句子、粒度、刻度、配色、层、头、阈值）：复制网址即可分享当前视图。"},
    # Head Finder page
    "finder_title": {"en": "Head Finder", "zh": "注意力头查找器"},
    "finder_caption": {
        "en": "Score every head on a relation with the method of Clark et al. (2019): a head is right on an "
              "item when the word it attends to most (other than itself) is the gold word.",
        "zh": "用 Clark 等人（2019）的方法为每个头打分：若一个头最关注的词（除自身外）恰是标注的词，则记为正确。",
    },
    "probe_source": {"en": "Items", "zh": "数据"},
    "builtin_set": {"en": "Built-in probe set", "zh": "内置探针集"},
    "builtin_en": {"en": "English (built-in)", "zh": "英文（内置）"},
    "builtin_zh": {"en": "Chinese (built-in)", "zh": "中文（内置）"},
    "format_probes": {"en": "Probe JSONL", "zh": "探针 JSONL"},
    "upload": {"en": "Upload a file", "zh": "上传文件"},
    "upload_kind": {"en": "File format", "zh": "文件格式"},
    "upload_help": {
        "en": "At most {mb} MB. Probe JSONL (the format of docs/architecture.md), CoNLL-U treebank, or WinoBias "
              "bracketed lines; the format is detected from the file.",
        "zh": "最多 {mb} MB。探针 JSONL（docs/architecture.md 格式）、CoNLL-U 树库或 WinoBias 括号格式；"
              "格式根据文件自动识别。",
    },
    "conllu_sep": {"en": "Script without spaces (Chinese, Japanese): join words with no space",
                   "zh": "无空格文字（中文、日文）：词之间不加空格"},
    "relation": {"en": "Relation", "zh": "关系"},
    "relation_subject-verb": {"en": "subject-verb", "zh": "主谓"},
    "relation_coreference": {"en": "coreference", "zh": "共指"},
    "relation_modifier": {"en": "modifier", "zh": "修饰"},
    "relation_semantic": {"en": "semantic", "zh": "语义关联"},
    "run_probe": {"en": "Score all heads", "zh": "为所有头打分"},
    "scoring": {"en": "Scoring: {done} of {n} sentences run", "zh": "正在打分：已运行 {done} / {n} 个句子"},
    "format_auto": {"en": "detect from the file", "zh": "根据文件自动识别"},
    "format_detected": {"en": "Detected format: {kind}", "zh": "识别出的格式：{kind}"},
    "items_counted": {
        "en": "{n} items of relation {relation}, from {sentences} sentences that have one ({total} sentences in "
              "the file have at least one item of some relation).",
        "zh": "关系 {relation} 共 {n} 条数据，来自含有该关系的 {sentences} 个句子（文件中共有 {total} 个句子"
              "至少含有一条数据）。",
    },
    "bad_file": {"en": "This file cannot be read: {error}", "zh": "无法读取该文件：{error}"},
    "best_heads": {"en": "Best heads against the baselines", "zh": "最佳注意力头与基线对比"},
    "column_direction": {"en": "direction", "zh": "方向"},
    "column_scorable": {"en": "scorable items", "zh": "可打分条目"},
    "column_best_head": {"en": "best head", "zh": "最佳头"},
    "column_accuracy": {"en": "accuracy", "zh": "准确率"},
    "column_first_word_accuracy": {"en": "first-word accuracy", "zh": "首词基线准确率"},
    "column_best_offset": {"en": "best offset", "zh": "最佳偏移"},
    "column_offset_accuracy": {"en": "offset accuracy", "zh": "偏移基线准确率"},
    "finder_counts": {"en": "n = {n}, skipped = {skipped}", "zh": "条目 {n} 条，跳过 {skipped} 条"},
    "example_guess": {"en": "head: {word}", "zh": "该头：{word}"},
    "direction_s2t": {"en": "source → target", "zh": "源 → 目标"},
    "direction_t2s": {"en": "target → source", "zh": "目标 → 源"},
    "examples_for_head": {"en": "Layer {layer}, head {head} on examples", "zh": "第 {layer} 层第 {head} 个头的示例"},
    "passing": {"en": "right", "zh": "正确"},
    "failing": {"en": "wrong", "zh": "错误"},
    "own_sentence": {"en": "On your own sentence", "zh": "在你自己的句子上"},
    "sink_aware": {"en": "Sink-aware scoring (decoders): the first word is no candidate",
                   "zh": "考虑注意力汇聚（解码器）：第一个词不作为候选"},
    "sink_aware_help": {
        "en": "Decoders pour much of every row's attention onto the first token (an attention sink, Xiao et al. "
              "2023), so most heads 'predict' the first word. With this on, a head's prediction is its "
              "largest weight on any other word; items whose gold word is the first word then count wrong "
              "(the first-word baseline is their share).",
        "zh": "解码器会把每一行的大量注意力放在第一个词元上（注意力汇聚，Xiao 等人 2023），因此多数头都“预测”"
              "第一个词。开启后，头的预测取除第一个词外权重最大的词；标注词是第一个词的条目因此记为错误"
              "（首词基线即其比例）。",
    },
    "sink_aware_on": {"en": "Sink-aware scoring: the first word is not a candidate of any head's prediction.",
                      "zh": "考虑注意力汇聚的打分：第一个词不作为任何头的预测候选。"},
    "direction_impossible": {
        "en": "{direction}: impossible for a causal model. In every item the gold word comes after the word "
              "whose attention is read, and a decoder cannot attend to later words, so no head is scored.",
        "zh": "{direction}：因果模型无法完成。每条数据中标注词都在被读取的词之后，而解码器不能关注后面的词，"
              "因此不为任何头打分。",
    },
    "grid_caption": {
        "en": "{scorable} of {n} items can be scored in this direction. Best head {best}: {accuracy}; "
              "first-word baseline {first}; best offset {offset}: {offset_accuracy}.",
        "zh": "该方向可打分的条目 {scorable} / {n}。最佳头 {best}：{accuracy}；首词基线 {first}；"
              "最佳偏移 {offset}：{offset_accuracy}。",
    },
    "examples_direction": {"en": "Examples of direction", "zh": "示例方向"},
    "examples_marks": {
        "en": "Row: the word whose attention is read. Solid blue box: the gold word; dotted orange box: the "
              "word the head attends to most (its prediction).",
        "zh": "行：被读取注意力的词。蓝色实线框：标注词；橙色虚线框：该头最关注的词（其预测）。",
    },
    # Learn page
    "learn_title": {"en": "Learn: how multi-head attention works", "zh": "学习：多头注意力如何工作"},
    "learn_formulas": {"en": "The formulas", "zh": "公式"},
    "learn_formulas_text": {
        "en": "Each query token's row of softmax weights says how much of each key token's value it mixes in: "
              "that row is what every heatmap in attnviz draws. M is the mask (0 where a token may look, a very "
              "large negative number where it may not: the future, in a decoder). With H query heads and K "
              "key/value heads, query head i reads KV head g(i).",
        "zh": "每个查询词元的一行 softmax 权重表示它从每个键词元的值中取多少：attnviz 的每张热力图画的就是这一行。"
              "M 是掩码（可以关注处为 0，不可关注处为极大的负数，例如解码器中的未来位置）。"
              "有 H 个查询头和 K 个键/值头时，第 i 个查询头读取第 g(i) 个 KV 头。",
    },
    "learn_variants": {"en": "MHA, MQA and GQA: one class, run live", "zh": "MHA、MQA 与 GQA：同一个类，实时运行"},
    "learn_variants_text": {
        "en": "n_kv_heads = n_heads is multi-head attention (MHA), 1 is multi-query (MQA), anything between is "
              "grouped-query (GQA). Fewer KV heads shrink the K/V projections and the KV cache a decoder keeps per "
              "token; the attention map keeps one row per query head. The shapes above come from running "
              "attnviz's MultiHeadAttention on a random (2, 10, d_model) input.",
        "zh": "n_kv_heads = n_heads 为多头注意力（MHA），为 1 时为多查询注意力（MQA），"
              "介于两者之间为分组查询注意力（GQA）。"
              "KV 头越少，K/V 投影和解码器每个词元的 KV 缓存越小；注意力图仍然每个查询头一张。"
              "上表的形状来自在随机 (2, 10, d_model) 输入上运行 attnviz 的 MultiHeadAttention。",
    },
    "learn_original": {"en": "The original Transformer beside the loaded model",
                       "zh": "原始 Transformer 与当前模型对比"},
    "learn_original_text": {
        "en": "Vaswani et al. (2017), 'Attention Is All You Need', Table 3: an encoder-decoder with post-norm "
              "blocks (norm after each residual, as BERT keeps); GPT-2 and Llama moved the norm before each block.",
        "zh": "Vaswani 等（2017）《Attention Is All You Need》表 3：编码器-解码器结构，采用后归一化（残差之后归一化，"
              "BERT 沿用）；GPT-2 和 Llama 将归一化移到每个子层之前。",
    },
    "column_variant": {"en": "variant", "zh": "变体"},
    "column_out": {"en": "out", "zh": "输出形状"},
    "column_attn": {"en": "attn", "zh": "注意力形状"},
    "column_parameters": {"en": "parameters", "zh": "参数量"},
    "column_kv_cache": {"en": "KV cache per token (floats)", "zh": "每词元 KV 缓存（浮点数个数）"},
    "column_kv_map": {"en": "query head -> KV head", "zh": "查询头 → KV 头"},
    "column_base": {"en": "base", "zh": "基础版"},
    "column_big": {"en": "big", "zh": "大型版"},
    "row_layers": {"en": "layers (N, encoder and decoder each)", "zh": "层数（N，编码器与解码器各）"},
    "row_heads": {"en": "heads (h)", "zh": "头数 (h)"},
    "row_dropout": {"en": "dropout", "zh": "随机失活率"},
    "row_label_smoothing": {"en": "label smoothing", "zh": "标签平滑"},
    "row_parameters": {"en": "parameters", "zh": "参数量"},
    "kind_encoder": {"en": "encoder", "zh": "编码器"},
    "kind_decoder": {"en": "decoder", "zh": "解码器"},
    "inference": {"en": "- (inference)", "zh": "-（推理）"},
    "learn_code": {"en": "The code that computes every view in attnviz", "zh": "attnviz 中计算所有视图的代码"},
    # Learn page: MHA / GQA / MQA measured, MHA -> GQA conversion, KV-group head distances (attnviz/ui/learn.py)
    "learn_shapes_caption": {
        "en": "One module, the variant chosen above, run on a random (2, 10, d_model) input: its shapes and which "
              "KV head each query head reads. The table below measures all three variants side by side.",
        "zh": "上面所选的一种变体：在随机 (2, 10, d_model) 输入上运行一个模块，显示其形状以及每个查询头读取哪个 KV 头。"
              "下表将三种变体并排实测。",
    },
    "learn_measured": {"en": "MHA, GQA and MQA measured side by side", "zh": "MHA、GQA 与 MQA 并排实测"},
    "learn_tokens": {"en": "Tokens decoded (N)", "zh": "解码词元数（N）"},
    "learn_tokens_help": {
        "en": "Each variant decodes N tokens one at a time with a KV cache; then the bytes its cache tensors hold "
              "are counted.",
        "zh": "每种变体借助 KV 缓存逐个解码 N 个词元，然后统计其缓存张量实际占用的字节数。",
    },
    "learn_measure": {"en": "Decode and measure", "zh": "解码并测量"},
    "learn_measure_progress": {"en": "Measuring: stage {done} of {total}", "zh": "测量中：第 {done} / {total} 步"},
    "learn_not_measured": {
        "en": "Parameters and the formula are shown; press “Decode and measure” to decode N tokens with each "
              "variant and fill in the measured cache and the time per token (a second or two).",
        "zh": "目前显示参数量与公式值；点击“解码并测量”，每种变体解码 N 个词元，"
              "并填入实测缓存与每词元耗时（约一两秒）。",
    },
    "learn_measured_caption": {
        "en": "Each variant is a stack of {layers} attention layers with d_model {d_model} and {heads} query heads; "
              "only the KV heads differ. “Cache bytes (measured)” is what the key and value tensors held after "
              "decoding {n} tokens ({dtype}); the formula is 2 × layers × N × KV heads × head_dim × bytes, and "
              "its share of MHA is 1, g/h and 1/h. Time per token: one new token through all layers with a "
              "cache of that length, the median of {repeats} steps, the three variants interleaved in one run "
              "on this server's CPU (torch threads: {threads}), so they compare with each other, not with a GPU. What "
              "to expect: MQA's step gets cheaper than MHA's as the cache grows. GQA's does not, here: this "
              "kernel, like Hugging Face's eager attention, copies each shared K/V head out to its query heads on "
              "every step (`repeat_kv`), as much memory traffic as MHA's own cache, while MQA's single head is "
              "broadcast without a copy. In this kernel GQA saves memory; fused kernels (`FlashAttention`, "
              "PyTorch's `scaled_dot_product_attention` with `enable_gqa`) read the shared heads without the "
              "copy and turn the saving into speed too.",
        "zh": "每种变体是 {layers} 层注意力的堆叠，d_model 为 {d_model}，查询头 {heads} 个，只有 KV 头数不同。"
              "“缓存字节（实测）”是解码 {n} 个词元后键、值张量实际占用的字节（{dtype}）；公式为 2 × 层数 × N × "
              "KV 头数 × head_dim × 每元素字节，相对 MHA 的比例为 1、g/h 与 1/h。每词元耗时：在该长度的缓存上，"
              "一个新词元通过所有层的时间，取 {repeats} 步的中位数，三种变体在同一次运行中交替测量，运行于本服务器的"
              "处理器（{threads} 个线程），因此只宜相互比较，不宜与图形处理器比较。"
              "预期：随着缓存变长，MQA 每步比 MHA 更快。GQA 在这里并不更快：本内核与 Hugging Face 的即时（`eager`）"
              "注意力一样，每一步都把共享的 K/V 头复制给它的各个查询头（`repeat_kv`），内存读写量与 MHA 自己的缓存"
              "相当；而 MQA 唯一的 KV 头无需复制即可广播。在本内核中 GQA 节省的是内存；融合内核（`FlashAttention`、"
              "`PyTorch` 的 `scaled_dot_product_attention` 配合 `enable_gqa`）无需复制即可读取共享的头，"
              "从而把节省也变成速度。",
    },
    "learn_col_kv_heads": {"en": "KV heads", "zh": "KV 头数"},
    "learn_col_formula_bytes": {"en": "cache bytes (formula)", "zh": "缓存字节（公式）"},
    "learn_col_formula_ratio": {"en": "share of MHA (formula)", "zh": "相对 MHA（公式）"},
    "learn_col_cache_bytes": {"en": "cache bytes (measured)", "zh": "缓存字节（实测）"},
    "learn_col_measured_ratio": {"en": "share of MHA (measured)", "zh": "相对 MHA（实测）"},
    "learn_col_ms": {"en": "ms per token, cache {n}", "zh": "每词元毫秒（缓存 {n}）"},
    "learn_who": {"en": "Who uses which", "zh": "谁在用哪一种"},
    "learn_col_model": {"en": "model", "zh": "模型"},
    "learn_col_query_heads": {"en": "query heads", "zh": "查询头数"},
    "learn_who_caption": {
        "en": "Head counts as published in each model's paper or configuration. Falcon-40B and 180B use 8 KV heads "
              "(GQA-like), unlike Falcon-7B. Gemini is sometimes listed under MQA, but its architecture is not "
              "published, so it is not placed here; Gemma, its open sibling, documents its own: MQA in Gemma 2B, "
              "MHA in Gemma 7B.",
        "zh": "头数取自各模型的论文或配置。与 `Falcon-7B` 不同，`Falcon-40B` 和 `180B` 使用 8 个 KV 头（类似 GQA）。"
              "`Gemini` 有时被归入 MQA，但其架构并未公开，因此这里不予归类；其开放版本 `Gemma` 公开了自己的设计："
              "`Gemma 2B` 用 MQA，`Gemma 7B` 用 MHA。",
    },
    "learn_sentence": {"en": "Sentence for the measurements below", "zh": "用于下方测量的句子"},
    "learn_too_long": {
        "en": "This section takes at most {limit} tokens; the sentence has {n}. Shorten it.",
        "zh": "本节最多处理 {limit} 个词元，而该句子有 {n} 个。请缩短句子。",
    },
    "learn_convert_title": {"en": "MHA → GQA: mean-pool the loaded model's key/value heads",
                            "zh": "MHA → GQA：对当前模型的键/值头做均值池化"},
    "learn_convert_text": {
        "en": "Ainslie et al. (2023) turn a multi-head checkpoint into GQA by replacing the key and value "
              "projection heads of each group with their mean, then training briefly to recover. Here only the "
              "first step is done, on a copy of the loaded model (weights and biases pooled, nothing retrained), "
              "and run on your sentence. For each layer: the Jensen-Shannon distance between each head's "
              "attention row before and after (0 = the same distribution, 1 = no overlap), its mean and "
              "maximum, and the largest change of any attention weight. Below: how far the final hidden states "
              "moved. With g = the number of heads nothing is pooled and every distance is exactly 0; fewer "
              "groups move the model further, which is the gap uptraining has to close.",
        "zh": "`Ainslie` 等（2023，GQA 论文）把多头检查点转换为 GQA：将每组的键、值投影头替换为它们的均值，"
              "再短暂训练以恢复。"
              "这里只做第一步：在当前模型的副本上（权重与偏置一起池化，不做任何再训练），并在你的句子上运行。"
              "每层给出：每个头的注意力行在转换前后的詹森-香农距离（0 表示分布相同，1 表示毫无重叠）的"
              "均值与最大值，以及任一注意力权重的最大变化。下方给出最终隐藏状态的变化幅度。g 等于头数时不做池化，"
              "所有距离恰为 0；组数越少，模型偏离越远，这正是继续训练需要弥补的差距。",
    },
    "learn_groups": {"en": "KV groups after pooling (g)", "zh": "池化后的 KV 组数（g）"},
    "learn_convert_run": {"en": "Pool and compare", "zh": "池化并比较"},
    "learn_col_js_mean": {"en": "mean JS distance", "zh": "平均詹森-香农距离"},
    "learn_col_js_max": {"en": "max JS distance", "zh": "最大詹森-香农距离"},
    "learn_col_max_abs": {"en": "max |Δ attention|", "zh": "最大 |Δ 注意力|"},
    "learn_convert_hidden": {
        "en": "g = {g}, {n} tokens: the final hidden states moved by {relative:.2%} of their norm (relative L2); "
              "mean cosine similarity per token {cosine:.4f}.",
        "zh": "g = {g}，{n} 个词元：最终隐藏状态的变化为其范数的 {relative:.2%}（相对 L2）；"
              "逐词元平均余弦相似度 {cosine:.4f}。",
    },
    "learn_convert_not_mha": {
        "en": "The loaded model already shares keys and values ({kind}: {heads} query heads, {kv} KV heads), so "
              "there is nothing to pool from multi-head attention. Below: whether the heads that share K/V attend "
              "alike. Choose an MHA model (MiniLM, BERT, GPT-2) to try the conversion.",
        "zh": "当前模型已经共享键和值（{kind}：{heads} 个查询头，{kv} 个 KV 头），没有可从多头注意力池化的内容。"
              "下面看共享 K/V 的头是否注意力相似。选择 MHA 模型（MiniLM、BERT、GPT-2）可尝试转换。",
    },
    "learn_kv_title": {"en": "Do heads that share K/V attend alike?", "zh": "共享 K/V 的头，注意力相似吗？"},
    "learn_kv_text": {
        "en": "In GQA the heads of one KV group read the same keys and values; only their queries differ. For each "
              "layer: the mean Jensen-Shannon distance between the attention maps of two heads of the same group, "
              "against two heads of different groups (0 = identical rows, 1 = disjoint). p is the share of random "
              "regroupings of the heads (same group sizes) whose within-group distance is as small: a small p "
              "means heads sharing K/V are closer than chance. The first row is left out (a decoder's first "
              "token can attend only to itself, in every head).",
        "zh": "在 GQA 中，同一 KV 组的头读取相同的键和值，只有查询不同。每层给出：同组两个头注意力图之间的平均"
              "詹森-香农距离，与不同组两个头之间的对比（0 表示各行相同，1 表示毫无重叠）。p 为随机重新分组"
              "（组大小不变）后组内距离同样小的比例：p 小说明共享 K/V 的头比偶然情况更相似。第一行不计入"
              "（解码器的第一个词元在每个头中都只能关注自己）。",
    },
    "learn_kv_mqa": {
        "en": "MQA: all heads read one KV head, so every pair is within the group and there is no “across” to "
              "compare with.",
        "zh": "MQA：所有头读取同一个 KV 头，因此所有头对都在同一组内，没有“组间”可比。",
    },
    "learn_kv_run": {"en": "Measure head distances", "zh": "测量头间距离"},
    "learn_col_within": {"en": "within a KV group", "zh": "同一 KV 组内"},
    "learn_col_across": {"en": "across KV groups", "zh": "不同 KV 组间"},
    "learn_col_p": {"en": "p (regrouping)", "zh": "p（随机重分组）"},
    "learn_kv_summary": {
        "en": "Within-group pairs closer than across-group pairs in {closer} of {layers} layers; p < 0.05 in {sig}. "
              "Mean over layers: within {within:.3f}, across {across:.3f} ({pairs_within} and {pairs_across} "
              "head pairs per layer).",
        "zh": "在 {layers} 层中有 {closer} 层组内头对比组间更接近；p < 0.05 的有 {sig} 层。各层平均："
              "组内 {within:.3f}，组间 {across:.3f}（每层分别有 {pairs_within} 与 {pairs_across} 个头对）。",
    },
    "learn_no_model": {"en": "No model is loaded, so this section has nothing to run on.",
                       "zh": "没有加载模型，本节无法运行。"},
    "no_items": {"en": "No items for this choice.", "zh": "该选择下没有数据。"},
    # Head ablation and the importance scan (attnviz/ui/ablation.py)
    "ablation_title": {"en": "Switch heads off", "zh": "关闭注意力头"},
    "ablation_caption_decoder": {
        "en": "A head switched off has its output zeroed before the output projection (the layer keeps the "
              "projection's bias), then the prediction is computed again: the top next tokens after the "
              "sentence and, if you type one, the log-probability of a continuation.",
        "zh": "被关闭的注意力头，其输出在输出投影之前被置零（该层保留投影的偏置），然后重新计算预测："
              "句子之后最可能的下一个词元，以及（若填写）续写的对数概率。",
    },
    "ablation_caption_mlm": {
        "en": "A head switched off has its output zeroed before the output projection. Put one `[MASK]` (or "
              "`<mask>`) in the sentence: the model's top fills with every head on and with the heads switched off.",
        "zh": "被关闭的注意力头，其输出在输出投影之前被置零。在句子中放入一个 `[MASK]`（或 `<mask>`）："
              "比较所有头开启时与关闭部分头后模型给出的最可能填充。",
    },
    "ablation_caption_embedding": {
        "en": "This model has no masked-LM head (a sentence-embedding model), so the effect is the change of "
              "the sentence embedding it was trained for: 1 - cosine of the mean-pooled last hidden state with "
              "and without the heads (0 = unchanged).",
        "zh": "该模型没有掩码语言模型头（句向量模型），因此效果用它训练所得的句向量变化来衡量："
              "关闭前后最后一层隐藏状态平均池化向量的 1 - 余弦相似度（0 表示不变）。",
    },
    "ablation_pair_note": {"en": "Only sentence A is used here.", "zh": "此处只使用句子 A。"},
    "ablation_heads": {"en": "Heads to switch off", "zh": "要关闭的注意力头"},
    "ablation_heads_help": {"en": "layer.head, counted from 0 (as the figures' L and H)",
                            "zh": "层.头，从 0 开始计数（与图中的 L 和 H 一致）"},
    "ablation_layers": {"en": "Whole layers to switch off", "zh": "整层关闭"},
    "ablation_layer_option": {"en": "layer {layer} (all heads)", "zh": "第 {layer} 层（所有头）"},
    "ablation_continuation": {"en": "Continuation to score", "zh": "要评分的续写"},
    "ablation_continuation_help": {
        "en": "Text that follows the sentence, e.g. `\" are\"` (a leading space belongs to it). Sentence and "
              "continuation are tokenised together; every token holding a character of the continuation is scored.",
        "zh": "紧接句子的文本，例如 `\" are\"`（开头的空格属于续写）。句子与续写一起分词；"
              "凡包含续写字符的词元都计入评分。",
    },
    "ablation_choose": {"en": "Choose heads or whole layers above to see what switching them off changes.",
                        "zh": "在上方选择注意力头或整层，查看关闭它们会改变什么。"},
    "ablation_n_off": {"en": "{n} of {total} heads switched off.", "zh": "已关闭 {total} 个头中的 {n} 个。"},
    "ablation_need_mask": {"en": "Put one `[MASK]` (or `<mask>`) in the sentence to see the model's fills.",
                           "zh": "请在句子中放入一个 `[MASK]`（或 `<mask>`）以查看模型的填充。"},
    "ablation_all_on": {"en": "All heads on", "zh": "所有头开启"},
    "ablation_switched_off": {"en": "Heads switched off", "zh": "关闭部分头后"},
    "ablation_column_after": {"en": "probability, heads off", "zh": "关闭后的概率"},
    "ablation_continuation_result": {
        "en": "`log P(continuation | sentence)`: {before:.3f} with every head, {after:.3f} with the heads "
              "switched off (change {delta:+.3f} nats).",
        "zh": "`log P(续写 | 句子)`：所有头开启时为 {before:.3f}，关闭部分头后为 {after:.3f}"
              "（变化 {delta:+.3f} nats）。",
    },
    "ablation_column_logprob_before": {"en": "log-probability, all heads", "zh": "对数概率（所有头）"},
    "ablation_column_logprob_after": {"en": "log-probability, heads off", "zh": "对数概率（关闭后）"},
    "ablation_embedding_result": {"en": "Sentence embedding change (1 - cosine): {change:.5f}",
                                  "zh": "句向量变化（1 - 余弦相似度）：{change:.5f}"},
    "ablation_failed": {"en": "Could not compute the effect: {error}", "zh": "无法计算效果：{error}"},
    "ablation_scan_title": {"en": "Importance scan: every head switched off alone", "zh": "重要性扫描：逐个关闭每个头"},
    "ablation_scan_caption_continuation": {
        "en": "Each cell: how much switching that head off alone lowers `log P(continuation | sentence)`, in nats.",
        "zh": "每个格子：单独关闭该头使 `log P(续写 | 句子)` 降低多少（单位 nats）。",
    },
    "ablation_scan_caption_next_token": {
        "en": "Each cell: how much switching that head off alone lowers the log-probability of the top next "
              "token ({token}), in nats. Type a continuation above to scan its log-probability instead.",
        "zh": "每个格子：单独关闭该头使最可能的下一个词元（{token}）的对数概率降低多少（单位 nats）。"
              "在上方填写续写，则改为扫描续写的对数概率。",
    },
    "ablation_scan_caption_mask_fill": {
        "en": "Each cell: how much switching that head off alone lowers the log-probability of the top fill "
              "({token}), in nats.",
        "zh": "每个格子：单独关闭该头使最可能的填充（{token}）的对数概率降低多少（单位 nats）。",
    },
    "ablation_scan_caption_embedding": {
        "en": "Each cell: the sentence embedding's change (1 - cosine) when that head alone is switched off.",
        "zh": "每个格子：单独关闭该头时句向量的变化（1 - 余弦相似度）。",
    },
    "ablation_scan_run": {"en": "Scan every head ({n} forward passes)", "zh": "扫描所有头（{n} 次前向计算）"},
    "ablation_scan_progress": {"en": "Heads switched off: {done} of {total}",
                               "zh": "已关闭并计算 {done} / {total} 个头"},
    "ablation_scan_too_long": {
        "en": "The scan takes sentences of at most {limit} tokens (with the continuation); this one has {n}.",
        "zh": "扫描只接受不超过 {limit} 个词元的句子（含续写）；当前为 {n} 个。",
    },
    "ablation_scan_grid_continuation": {"en": "drop of log P(continuation)", "zh": "续写对数概率的下降"},
    "ablation_scan_grid_next_token": {"en": "drop of log P(top next token)", "zh": "最可能下一个词元的对数概率下降"},
    "ablation_scan_grid_mask_fill": {"en": "drop of log P(top fill)", "zh": "最可能填充的对数概率下降"},
    "ablation_scan_grid_embedding": {"en": "embedding change (1 - cosine)", "zh": "句向量变化（1 - 余弦相似度）"},
    # Lenses and the query-key view (ui/lenses.py)
    "lens": {"en": "Lens", "zh": "视角"},
    "lens_help": {
        "en": "What each map shows. Raw: the softmax weights. Value-weighted: the weight times the size of what "
              "the head moves from that token. Rollout and flow: how much of each position comes from each input "
              "token through all the layers below (all heads together, one map per layer).",
        "zh": "每张图显示什么。原始：softmax 权重。值加权：权重乘以该头从该词元搬运的向量大小。"
              "展开与流：经过下面所有层后，每个位置有多少来自每个输入词元（所有头合并，每层一张图）。",
    },
    "lens_raw": {"en": "raw weights", "zh": "原始权重"},
    "lens_value": {"en": "value-weighted", "zh": "值加权"},
    "lens_rollout": {"en": "rollout", "zh": "注意力展开"},
    "lens_flow": {"en": "flow", "zh": "注意力流"},
    "lens_raw_caption": {"en": "The attention weights α as the softmax gives them.",
                         "zh": "softmax 给出的注意力权重 α。"},
    "lens_value_caption": {
        "en": "‖α_ij f(x_j)‖ with f(x) = (x W_V + b_V) W_O restricted to the head (Kobayashi et al. 2020): a high "
              "weight on a token whose transformed value vector is tiny moves almost nothing.",
        "zh": "‖α_ij f(x_j)‖，其中 f(x) = (x W_V + b_V) W_O 只取该头的部分（Kobayashi 等 2020）："
              "若某词元变换后的值向量很小，即使权重高也几乎不搬运信息。",
    },
    "lens_rollout_caption": {
        "en": "Attention rollout (Abnar & Zuidema 2020): per layer A = 0.5 · mean over heads of α + 0.5 · I (the "
              "residual), rows renormalised, multiplied from the first layer up. One map per layer, so the mosaic "
              "has one column.",
        "zh": "注意力展开（Abnar 与 Zuidema 2020）：每层 A = 0.5 · 各头 α 的平均 + 0.5 · I（残差），"
              "行重新归一化，从第一层起逐层相乘。每层一张图，所以总览图只有一列。",
    },
    "lens_flow_caption": {
        "en": "Attention flow (Abnar & Zuidema 2020): the same graph of A's read as capacities; each cell is the "
              "maximum flow from a position above the layer to an input token, rows normalised. Limited to "
              "{limit} tokens: it solves one max-flow per layer and token pair (a few seconds for 6 layers, "
              "under a minute for 30).",
        "zh": "注意力流（Abnar 与 Zuidema 2020）：把同一张 A 图的权重当作容量；每个格子是从该层之上某位置到某输入词元的"
              "最大流，按行归一化。最多 {limit} 个词元：每层每对词元都要求解一次最大流"
              "（6 层需数秒，30 层不到一分钟）。",
    },
    "lens_normalise": {"en": "Row-normalise", "zh": "按行归一化"},
    "lens_normalise_help": {"en": "Divide each row by its sum, so it reads as shares like the raw weights.",
                            "zh": "每行除以其总和，使其像原始权重一样表示份额。"},
    "lens_peak": {"en": "Not normalised: colours are relative to the largest value, {peak:.3g}.",
                  "zh": "未归一化：颜色相对于最大值 {peak:.3g}。"},
    "lens_self_only": {"en": "Rollout and flow need a self-attention stack; showing raw weights.",
                       "zh": "展开与流需要自注意力堆叠；改为显示原始权重。"},
    "lens_flow_too_long": {
        "en": "Attention flow is limited to {limit} tokens (one max-flow per layer and token pair); this input "
              "has {n}. Showing raw weights: shorten the sentence, or use rollout.",
        "zh": "注意力流最多支持 {limit} 个词元（每层每对词元一次最大流）；当前输入有 {n} 个。"
              "现显示原始权重：请缩短句子，或使用注意力展开。",
    },
    "lens_flow_run": {"en": "Compute the attention flow", "zh": "计算注意力流"},
    "lens_flow_pending": {"en": "The flow is not computed yet for this text: showing raw weights until it is.",
                          "zh": "尚未为此文本计算注意力流：计算完成前显示原始权重。"},
    "lens_flow_progress": {"en": "Layer {done} of {total}", "zh": "第 {done} / {total} 层"},
    "lens_all_heads": {"en": "all heads", "zh": "所有头"},
    "lens_head_note": {"en": "{lens}: one map per layer (all heads together); the head choice does not apply.",
                       "zh": "{lens}：每层一张图（所有头合并）；所选的头不适用。"},
    "qk_title": {"en": "Query-key view: why one key wins", "zh": "查询-键视图：为何某个键胜出"},
    "qk_caption": {
        "en": "Head {head} of layer {layer} (keys of KV head {kv}{rotary}). Each product q[d] · k[d] / √{dim} is "
              "one dimension's share of the score; the products of a key add up to its score before the softmax, "
              "and the softmax of the scores is the attention row. Blue: positive, red: negative.",
        "zh": "第 {layer} 层第 {head} 个头（键来自 KV 头 {kv}{rotary}）。每个乘积 q[d] · k[d] / √{dim} 是一个维度"
              "对分数的贡献；一个键的乘积之和就是 softmax 之前的分数，分数的 softmax 就是注意力行。"
              "蓝色为正，红色为负。",
    },
    "qk_rotary": {"en": ", after rotary", "zh": "，已施加旋转位置编码"},
    "qk_query": {"en": "Query token", "zh": "查询词元"},
    "qk_shown": {"en": "The {n} visible keys with the highest weight, of {total}.",
                 "zh": "显示权重最高的 {n} 个可见键（共 {total} 个）。"},
    "qk_check": {"en": "Softmax of these scores against the trace's row: max difference {diff:.1e}.",
                 "zh": "这些分数的 softmax 与轨迹中该行的最大差值：{diff:.1e}。"},
    "qk_positive": {"en": "positive q·k", "zh": "正的 q·k"},
    "qk_negative": {"en": "negative q·k", "zh": "负的 q·k"},
    "qk_score": {"en": "score", "zh": "分数"},
    "qk_weight": {"en": "weight", "zh": "权重"},
    "qk_key": {"en": "key", "zh": "键"},
    "qk_dimension": {"en": "dimension", "zh": "维度"},
    "qk_product": {"en": "q·k/√D", "zh": "q·k/√D"},
    # Minimal pairs (ui/pairs.py)
    "minpair_title": {"en": "Compare two sentences (minimal pair)", "zh": "比较两个句子（最小对立对）"},
    "minpair_caption": {
        "en": "A second sentence that differs from the Sentence in one place (are / is). Both are split into words: "
              "the words before and after the change are matched one to one, and the changed words of each sentence "
              "form one slot (\"are→is\"; ∅ where one sentence has none). Each head's word-level attention of the "
              "Sentence minus the second sentence's is shown.",
        "zh": "输入与上方句子只有一处不同的第二个句子（如 `are` / `is`）。两句都切分为词：变化之前和之后的词一一对应，"
              "每句中变化的词合为一个位置（`are→is`；某句没有时记作 ∅）。图中是每个注意力头在上方句子上的"
              "词级注意力减去第二个句子的词级注意力。",
    },
    "minpair_pair_note": {"en": "Only the first sentence is compared; the sentence B input is left out here.",
                          "zh": "这里只比较第一个句子；句子 B 的输入不参与比较。"},
    "minpair_builtin": {"en": "Built-in pair", "zh": "内置句对"},
    "minpair_builtin_help": {
        "en": "Pairs written for attnviz (English and Chinese): the grammatical sentence goes to Sentence, its "
              "ungrammatical twin to Second sentence.",
        "zh": "为 attnviz 编写的句对（英文和中文）：合乎语法的句子填入上方句子，不合语法的对应句填入第二个句子。",
    },
    "minpair_second": {"en": "Second sentence", "zh": "第二个句子"},
    "minpair_second_help": {"en": "The Sentence with one word (or a few adjacent words) changed, added or removed.",
                            "zh": "把上方句子中的一个词（或几个相邻的词）替换、增加或删除后得到的句子。"},
    "minpair_empty": {"en": "Type a second sentence, or pick a built-in pair, to compare.",
                      "zh": "请输入第二个句子，或选择一个内置句对进行比较。"},
    "minpair_too_long": {"en": "Minimal pairs are compared up to {n} tokens a sentence: shorten the sentences.",
                         "zh": "最小对立对每句最多比较 {n} 个词元：请缩短句子。"},
    "minpair_same": {"en": "The two sentences have the same words: change one of them.",
                     "zh": "两个句子的词完全相同：请修改其中一个。"},
    "minpair_failed": {"en": "Could not compare these sentences: {error}", "zh": "无法比较这两个句子：{error}"},
    "minpair_kind_substitution": {"en": "Substitution {change}, after {prefix} common words and before {suffix}.",
                                  "zh": "替换 {change}：之前有 {prefix} 个相同的词，之后有 {suffix} 个。"},
    "minpair_kind_insertion": {"en": "Insertion {change}, after {prefix} common words and before {suffix}.",
                               "zh": "插入/删除 {change}：之前有 {prefix} 个相同的词，之后有 {suffix} 个。"},
    "minpair_grid_title": {"en": "largest |first − second| of each head", "zh": "每个头的最大 |第一句 − 第二句|"},
    "minpair_head": {"en": "Head to compare", "zh": "要比较的注意力头"},
    "minpair_difference": {"en": "first − second", "zh": "第一句 − 第二句"},
    "minpair_heatmap_caption": {
        "en": "Layer {layer}, head {head}: word-level attention of the Sentence minus the second sentence's. Blue: "
              "the Sentence attends more; red: less; a gap: a word only one sentence has.",
        "zh": "第 {layer} 层第 {head} 个头：上方句子的词级注意力减去第二个句子的。蓝色：上方句子的注意力更多；"
              "红色：更少；空白：只有一个句子有的词。",
    },
    "minpair_causal_note": {
        "en": "A decoder's rows for the words before the change see the same words in both sentences, so they do "
              "not differ.",
        "zh": "解码器中变化之前的词在两个句子里看到的词相同，所以这些行没有差别。",
    },
    "minpair_preference": {"en": "The model's preference", "zh": "模型的偏好"},
    "minpair_prefers_a": {"en": "The model prefers the Sentence: {a:.3f} against {b:.3f} (margin {margin:+.3f} nats).",
                          "zh": "模型更偏好上方句子：{a:.3f} 对 {b:.3f}（差值 {margin:+.3f} 奈特）。"},
    "minpair_prefers_b": {
        "en": "The model prefers the second sentence: {b:.3f} against {a:.3f} (margin {margin:+.3f} nats).",
        "zh": "模型更偏好第二个句子：{b:.3f} 对 {a:.3f}（差值 {margin:+.3f} 奈特）。",
    },
    "minpair_prefers_none": {"en": "The model scores both sentences the same ({a:.3f}).",
                             "zh": "模型给两个句子的分数相同（{a:.3f}）。"},
    "minpair_column_sentence": {"en": "sentence", "zh": "句子"},
    "minpair_column_logprob": {"en": "log-probability", "zh": "对数概率"},
    "minpair_column_tokens": {"en": "scored tokens", "zh": "计分的词元"},
    "minpair_method_prefix": {
        "en": "Method: the log-probability of each sentence's differing word given the common prefix ({prefix}).",
        "zh": "方法：在相同前缀（{prefix}）之后，各句中不同的词的对数概率。",
    },
    "minpair_method_sentence": {"en": "Method: the log-probability of each whole sentence.",
                                "zh": "方法：每个完整句子的对数概率。"},
    "minpair_method_masked": {
        "en": "Method: masked word score: each token of the differing word is masked in turn and the model's "
              "log-probabilities of the original tokens are summed (pseudo-log-likelihood).",
        "zh": "方法：掩码词分数：依次遮蔽不同的词的每个词元，把模型给原词元的对数概率相加（伪对数似然）。",
    },
    "minpair_first_token": {"en": "This tokenizer adds no start token, so each sentence's first token is left out.",
                            "zh": "该分词器不添加起始词元，所以每句的第一个词元不计分。"},
    "minpair_no_preference": {
        "en": "Preference: not available. This encoder has no masked-LM head (a sentence-embedding model), so it "
              "gives sentences no probability.",
        "zh": "偏好：不可用。该编码器没有掩码语言模型头（是句向量模型），不给句子概率。",
    },
    "minpair_preference_failed": {"en": "No preference for this pair: {error}",
                                  "zh": "无法给出这对句子的偏好：{error}"},
    # Words inside figures (plots.PlotText)
    "plot_attention": {"en": "attention", "zh": "注意力"},
    "plot_query_axis": {"en": "from (query)", "zh": "从（查询）"},
    "plot_key_axis": {"en": "to (key)", "zh": "到（键）"},
    "plot_mean": {"en": "mean", "zh": "平均"},
    "plot_from": {"en": "from", "zh": "从"},
    "plot_to": {"en": "to", "zh": "到"},
    "plot_weight": {"en": "weight", "zh": "权重"},
    "plot_pooled_weight": {"en": "row-mean of the weight summed over the block",
                           "zh": "块内权重之和的行平均"},
    "plot_masked": {"en": "masked (causal)", "zh": "已遮蔽（因果）"},
    "plot_open_head": {"en": "click to open this head", "zh": "点击打开该头"},
    "plot_layer": {"en": "layer", "zh": "层"},
    "plot_head": {"en": "head", "zh": "头"},
}


def translate(language: str, key: str, **values) -> str:
    table = STRINGS[key]
    text = table.get(language) or table["en"]
    return text.format(**values) if values else text
