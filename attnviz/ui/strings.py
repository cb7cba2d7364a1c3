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
    "no_items": {"en": "No items for this choice.", "zh": "该选择下没有数据。"},
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
