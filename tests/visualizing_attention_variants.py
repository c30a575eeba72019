"""Known-wrong and known-correct implementations for the ``visualizing_attention`` assignment.

Pure data, no tests; the same contract as ``kernel_attention_variants``:

* every ``WRONG`` entry must fail each hidden test named in ``must_lose``, and each public check
  named in ``must_fail_public`` (so the student sees the bug before submitting);
* every ``CORRECT`` entry must pass every hidden test and every public check.

Sources may use what the notebook's setup cell imports (``math``, ``torch``, ``F``), the given
``mean_over_queries`` and the other functions the students write. Variants share graded notebooks
where their bugs cannot hide each other's (``pack_wrong``, ``pack_correct``, at the end).
"""

from tests.support.notebook_edits import master, pack_correct, pack_wrong

_GPT_MUST = {"must_lose": ["test_rotary_hidden_queries_and_keys", "test_gpt_attention_hidden_heads"],
             "must_fail_public": ["test_gpt_attention_public"]}
_BERT_MUST = {"must_lose": ["test_bert_attention_hidden_padded"], "must_fail_public": ["test_bert_attention_public"]}


def _rotary(body: str) -> str:
    """rotary_queries_and_keys with ``body`` in place of the lines between the slices and the return."""
    return '''
def rotary_queries_and_keys(model, inputs, layer, head):
''' + body


def _bert(select: str = "hidden_states[layer]", columns: str = "slice(head * d, (head + 1) * d)",
          scale: str = "math.sqrt(d)", mask: bool = True, dim: int = -1, bias: bool = True) -> str:
    project = ("projections.query(hidden)", "projections.key(hidden)") if bias else \
        ("hidden @ projections.query.weight.T", "hidden @ projections.key.weight.T")
    masking = 'scores = scores.masked_fill(~inputs["attention_mask"].bool()[:, None, :], float("-inf"))' if mask else ""
    return f'''
def attention_from_qk(model, inputs, layer, head):
    hidden = model(**inputs, output_hidden_states=True).{select}
    projections = model.encoder.layer[layer].attention.self
    d = model.config.hidden_size // model.config.num_attention_heads
    columns = {columns}
    q = ({project[0]})[..., columns]
    k = ({project[1]})[..., columns]
    scores = q @ k.transpose(-1, -2) / {scale}
    {masking}
    return scores.softmax(dim={dim})
'''


_ROTARY_START = '''    hidden = model(**inputs, output_hidden_states=True).hidden_states[layer]
    block = model.model.layers[layer]
    x = block.input_layernorm(hidden)
    config = model.config
    d = config.head_dim
    kv_head = head // (config.num_attention_heads // config.num_key_value_heads)
    q = block.self_attn.q_proj(x)[..., head * d:(head + 1) * d]
    k = block.self_attn.k_proj(x)[..., kv_head * d:(kv_head + 1) * d]
    T = x.shape[1]
    base = config.rope_parameters["rope_theta"]
'''
_ROTATE = '''    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)

    def rotate(v):
        first, second = v[..., : d // 2], v[..., d // 2:]
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)

    return rotate(q), rotate(k)
'''


def _causal(scale: str = "math.sqrt(q.shape[-1])", causal: bool = True, padding: bool = True) -> str:
    allowed = ["torch.ones(T, T, dtype=torch.bool).tril()[None]" if causal else "torch.ones(1, T, T, dtype=torch.bool)"]
    if padding:
        allowed.append('inputs["attention_mask"].bool()[:, None, :]')
    return f'''
def causal_attention_from_qk(model, inputs, layer, head):
    q, k = rotary_queries_and_keys(model, inputs, layer, head)
    T = q.shape[1]
    scores = q @ k.transpose(-1, -2) / {scale}
    allowed = {" & ".join(allowed)}
    return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
'''


WRONG = [
    # ------------------------------------------------------------------ the GPT-style head
    {"name": "rope_left_out", "function": "rotary_queries_and_keys", **_GPT_MUST,
     "source": _rotary(_ROTARY_START + "    return q, k  # BUG: no rotary embedding\n")},
    {"name": "rope_rotates_neighbouring_pairs", "function": "rotary_queries_and_keys", **_GPT_MUST,
     "source": _rotary(_ROTARY_START + '''    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)

    def rotate(v):  # BUG: turns entries (2i, 2i + 1) together (the GPT-J layout), not (i, i + d/2)
        even, odd = v[..., 0::2], v[..., 1::2]
        return torch.stack([even * cos - odd * sin, odd * cos + even * sin], dim=-1).flatten(-2)

    return rotate(q), rotate(k)
''')},
    {"name": "key_head_by_modulo", "function": "rotary_queries_and_keys", **_GPT_MUST,
     "source": _rotary(_ROTARY_START.replace(
         "kv_head = head // (config.num_attention_heads // config.num_key_value_heads)",
         "kv_head = head % config.num_key_value_heads  # BUG: heads 0, 3, 6 share key head 0 only by accident") + _ROTATE)},
    {"name": "input_layernorm_skipped", "function": "rotary_queries_and_keys", **_GPT_MUST,
     "source": _rotary(_ROTARY_START.replace("x = block.input_layernorm(hidden)", "x = hidden  # BUG: no RMSNorm") + _ROTATE)},
    {"name": "gpt_input_of_the_next_layer", "function": "rotary_queries_and_keys", **_GPT_MUST,
     "source": _rotary(_ROTARY_START.replace("hidden_states[layer]", "hidden_states[layer + 1]  # BUG: the layer's output") + _ROTATE)},
    {"name": "rope_base_hard_coded", "function": "rotary_queries_and_keys", **_GPT_MUST,
     "source": _rotary(_ROTARY_START.replace('base = config.rope_parameters["rope_theta"]', "base = 10000.0  # BUG: GPT-NeoX's default, not this model's") + _ROTATE)},
    {"name": "no_causal_mask", "function": "causal_attention_from_qk", "source": _causal(causal=False),
     "must_lose": ["test_gpt_attention_hidden_heads", "test_gpt_attention_hidden_without_returned_attentions"],
     "must_fail_public": ["test_gpt_attention_public"]},
    {"name": "no_padding_mask", "function": "causal_attention_from_qk", "source": _causal(padding=False),
     "must_lose": ["test_gpt_attention_hidden_heads"], "must_fail_public": ["test_gpt_attention_public"]},
    {"name": "gpt_scaled_by_head_size", "function": "causal_attention_from_qk", "source": _causal(scale="q.shape[-1]"),
     "must_lose": ["test_gpt_attention_hidden_heads", "test_gpt_attention_hidden_without_returned_attentions"],
     "must_fail_public": ["test_gpt_attention_public"]},
    {"name": "gpt_returns_the_models_attentions", "function": "causal_attention_from_qk", "source": '''
def causal_attention_from_qk(model, inputs, layer, head):
    return model(**inputs).attentions[layer][:, head]  # BUG: reads the answer instead of computing it
''', "must_lose": ["test_gpt_attention_hidden_without_returned_attentions"], "must_fail_public": ["test_gpt_attention_public"]},
    # ------------------------------------------------------------------ is_causal
    {"name": "is_causal_counts_the_diagonal", "function": "is_causal", "source": '''
def is_causal(attn):
    return bool((attn.triu() <= 1e-6).all())  # BUG: the diagonal is allowed
''', "must_lose": ["test_is_causal_hidden"], "must_fail_public": ["test_is_causal_public"]},
    {"name": "is_causal_returns_a_tensor", "function": "is_causal", "source": '''
def is_causal(attn):
    return (attn.triu(diagonal=1) <= 1e-6).all()  # BUG: a 0-d tensor, not a Python bool
''', "must_lose": ["test_is_causal_hidden"], "must_fail_public": ["test_is_causal_public"]},
    # ------------------------------------------------------------------ the BERT-style head
    {"name": "bert_not_scaled", "function": "attention_from_qk", "source": _bert(scale="1"), **_BERT_MUST},
    {"name": "bert_no_padding_mask", "function": "attention_from_qk", "source": _bert(mask=False), **_BERT_MUST},
    {"name": "bert_heads_interleaved", "function": "attention_from_qk",
     "source": _bert(columns="slice(head, None, model.config.num_attention_heads)"), **_BERT_MUST},
    {"name": "bert_input_of_the_next_layer", "function": "attention_from_qk", "source": _bert(select="hidden_states[layer + 1]"), **_BERT_MUST},
    {"name": "bert_softmax_over_queries", "function": "attention_from_qk", "source": _bert(dim=-2), **_BERT_MUST},
    {"name": "bert_projections_without_bias", "function": "attention_from_qk", "source": _bert(bias=False), **_BERT_MUST},
    {"name": "bert_returns_the_models_attentions", "function": "attention_from_qk", "source": '''
def attention_from_qk(model, inputs, layer, head):
    return model(**inputs).attentions[layer][:, head]  # BUG: reads the answer instead of computing it
''', "must_lose": ["test_bert_attention_hidden_pairs_without_returned_attentions"], "must_fail_public": ["test_bert_attention_public"]},
    # ------------------------------------------------------------------ key cosines
    {"name": "cosines_of_hidden_states", "function": "key_cosines", "source": '''
def key_cosines(model, tokenizer, sentence_a, sentence_b, word):
    token = tokenizer.convert_tokens_to_ids(word)
    states = []
    for sentence in (sentence_a, sentence_b):
        inputs = tokenizer(sentence, return_tensors="pt")
        ids = inputs["input_ids"][0].tolist()
        if token not in ids:
            raise ValueError(f"{word!r} is not in {sentence!r}")
        hidden = model(**inputs, output_hidden_states=True).hidden_states
        states.append(torch.stack([h[0, ids.index(token)] for h in hidden[:-1]]))  # BUG: not the keys
    return F.cosine_similarity(states[0], states[1], dim=-1)
''', "must_lose": ["test_key_cosines_hidden"], "must_fail_public": ["test_key_cosines_public"]},
    {"name": "cosines_of_keys_in_the_pair", "function": "key_cosines", "source": '''
def key_cosines(model, tokenizer, sentence_a, sentence_b, word):
    token = tokenizer.convert_tokens_to_ids(word)
    inputs = tokenizer(sentence_a, sentence_b, return_tensors="pt")  # BUG: one input, each sees the other
    ids = inputs["input_ids"][0].tolist()
    if ids.count(token) < 2:
        raise ValueError(f"{word!r} is not in both sentences")
    first = ids.index(token)
    second = ids.index(token, first + 1)
    hidden = model(**inputs, output_hidden_states=True).hidden_states
    keys = torch.stack([layer.attention.self.key(hidden[l][0]) for l, layer in enumerate(model.encoder.layer)])
    return F.cosine_similarity(keys[:, first], keys[:, second], dim=-1)
''', "must_lose": ["test_key_cosines_hidden"], "must_fail_public": ["test_key_cosines_public"]},
    # ------------------------------------------------------------------ head scores and entropy
    {"name": "previous_token_counts_the_first_query", "function": "previous_token_score", "source": '''
def previous_token_score(attentions, inputs):
    queries = inputs["attention_mask"].bool()  # BUG: position 0 has no previous token but counts as 0
    return mean_over_queries(attentions, lambda a: F.pad(a.diagonal(offset=-1, dim1=-2, dim2=-1), (1, 0)), queries)
''', "must_lose": ["test_head_scores_hidden_synthetic", "test_head_scores_hidden_model"], "must_fail_public": ["test_head_scores_public"]},
    {"name": "next_token_counts_the_last_real_query", "function": "next_token_score", "source": '''
def next_token_score(attentions, inputs):
    queries = inputs["attention_mask"].bool().clone()
    queries[:, -1] = False  # BUG: only the last column is dropped; a padded sentence's last real token still counts
    return mean_over_queries(attentions, lambda a: F.pad(a.diagonal(offset=1, dim1=-2, dim2=-1), (0, 1)), queries)
''', "must_lose": ["test_head_scores_hidden_synthetic", "test_head_scores_hidden_model"], "must_fail_public": ["test_head_scores_public"]},
    {"name": "cls_score_counts_padding_queries", "function": "cls_score", "source": '''
def cls_score(attentions, inputs):
    queries = torch.ones_like(inputs["attention_mask"], dtype=torch.bool)  # BUG: padding rows count too
    return mean_over_queries(attentions, lambda a: a[..., 0], queries)
''', "must_lose": ["test_head_scores_hidden_synthetic", "test_head_scores_hidden_model"], "must_fail_public": ["test_head_scores_public"]},
    {"name": "sep_score_on_the_last_real_token_only", "function": "sep_score", "source": '''
def sep_score(attentions, inputs, sep_id):
    last = inputs["attention_mask"].sum(dim=1) - 1  # BUG: a pair's first [SEP] is missed
    is_last = torch.zeros_like(inputs["attention_mask"], dtype=torch.bool)
    is_last[torch.arange(len(last)), last] = True
    return mean_over_queries(attentions, lambda a: (a * is_last[:, None, None, :]).sum(-1), inputs["attention_mask"].bool())
''', "must_lose": ["test_head_scores_hidden_synthetic", "test_head_scores_hidden_model"], "must_fail_public": ["test_head_scores_public"]},
    {"name": "self_score_mean_of_sentence_means", "function": "self_score", "source": '''
def self_score(attentions, inputs):
    real = inputs["attention_mask"].bool()
    per_layer = []
    for attn in attentions:
        diagonal = attn.diagonal(dim1=-2, dim2=-1)  # (B, heads, T)
        per_sentence = [diagonal[b][:, real[b]].mean(dim=-1) for b in range(len(real))]
        per_layer.append(torch.stack(per_sentence).mean(dim=0))  # BUG: short sentences weigh as much as long ones
    return torch.stack(per_layer)
''', "must_lose": ["test_head_scores_hidden_synthetic", "test_head_scores_hidden_model"], "must_fail_public": ["test_head_scores_public"]},
    {"name": "entropy_in_bits", "function": "attention_entropy", "source": '''
def attention_entropy(attentions, inputs):
    return mean_over_queries(attentions, lambda a: -(a * torch.log2(a.clamp_min(1e-30))).sum(-1),
                             inputs["attention_mask"].bool())  # BUG: bits, not nats
''', "must_lose": ["test_entropy_hidden"], "must_fail_public": ["test_entropy_public"]},
    {"name": "entropy_counts_padding_queries", "function": "attention_entropy", "source": '''
def attention_entropy(attentions, inputs):
    everything = torch.ones_like(inputs["attention_mask"], dtype=torch.bool)  # BUG: padding rows count
    return mean_over_queries(attentions, lambda a: -torch.special.xlogy(a, a).sum(-1), everything)
''', "must_lose": ["test_entropy_hidden"], "must_fail_public": ["test_entropy_public"]},
    # ------------------------------------------------------------------ right values, but an argument changed in place
    {"name": "rope_positions_written_into_the_mask", "function": "rotary_queries_and_keys",
     "must_lose": ["test_rotary_hidden_queries_and_keys"], "must_fail_public": ["test_gpt_attention_public"],
     "source": _rotary(_ROTARY_START + '''    positions = inputs["attention_mask"]  # BUG: not a copy: the next line writes into the caller's mask
    positions[:] = torch.arange(T)  # positions 0, ..., T - 1 of every sentence
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions[0].double()[:, None] * inv_freq[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)

    def rotate(v):
        first, second = v[..., : d // 2], v[..., d // 2:]
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)

    return rotate(q), rotate(k)
''')},
    {"name": "causal_padding_flags_xor_into_the_mask", "function": "causal_attention_from_qk", "source": '''
def causal_attention_from_qk(model, inputs, layer, head):
    q, k = rotary_queries_and_keys(model, inputs, layer, head)
    T = q.shape[1]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    padding = inputs["attention_mask"]
    padding ^= 1  # BUG: ^= writes into the caller's mask: 1 now marks its padding
    blocked = ~torch.ones(T, T, dtype=torch.bool).tril()[None] | padding.bool()[:, None, :]
    return scores.masked_fill(blocked, float("-inf")).softmax(dim=-1)
''', "must_lose": ["test_gpt_attention_hidden_without_returned_attentions"],
     "must_fail_public": ["test_gpt_attention_public"]},
    {"name": "is_causal_triu_in_place", "function": "is_causal", "source": '''
def is_causal(attn):
    attn.triu_(diagonal=1)  # BUG: triu_ zeroes the caller's weights on and below the diagonal
    return bool((attn <= 1e-6).all())
''', "must_lose": ["test_is_causal_hidden"], "must_fail_public": ["test_is_causal_public"]},
    {"name": "bert_additive_mask_built_in_the_callers_mask", "function": "attention_from_qk", "source": '''
def attention_from_qk(model, inputs, layer, head):
    hidden = model(**inputs, output_hidden_states=True).hidden_states[layer]
    projections = model.encoder.layer[layer].attention.self
    d = model.config.hidden_size // model.config.num_attention_heads
    columns = slice(head * d, (head + 1) * d)
    q = projections.query(hidden)[..., columns]
    k = projections.key(hidden)[..., columns]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    additive = inputs["attention_mask"]
    additive -= 1  # BUG: -= and *= write into the caller's mask
    additive *= 10000  # BERT's original additive mask: 0 on real keys, -10000 on padding
    return (scores + additive[:, None, :]).softmax(dim=-1)
''', "must_lose": ["test_bert_attention_hidden_pairs_without_returned_attentions"],
     "must_fail_public": ["test_bert_attention_public"]},
    {"name": "previous_token_queries_without_clone", "function": "previous_token_score", "source": '''
def previous_token_score(attentions, inputs):
    queries = inputs["attention_mask"]  # BUG: not a copy: the next line writes into the caller's mask
    queries[:, 0] = 0
    return mean_over_queries(attentions, lambda a: F.pad(a.diagonal(offset=-1, dim1=-2, dim2=-1), (1, 0)), queries.bool())
''', "must_lose": ["test_head_scores_hidden_synthetic"], "must_fail_public": ["test_head_scores_public"]},
    {"name": "next_token_queries_shifted_in_the_mask", "function": "next_token_score", "source": '''
def next_token_score(attentions, inputs):
    queries = inputs["attention_mask"]  # BUG: not a copy: the next two lines shift the caller's mask
    queries[:, :-1] = queries[:, 1:].clone()
    queries[:, -1] = 0
    return mean_over_queries(attentions, lambda a: F.pad(a.diagonal(offset=1, dim1=-2, dim2=-1), (0, 1)), queries.bool())
''', "must_lose": ["test_head_scores_hidden_synthetic"], "must_fail_public": ["test_head_scores_public"]},
    {"name": "cls_weights_masked_in_a_view", "function": "cls_score", "source": '''
def cls_score(attentions, inputs):
    real = inputs["attention_mask"]
    per_layer = []
    for attn in attentions:
        on_cls = attn[..., 0]  # a view of the caller's weights
        on_cls *= real[:, None, :]  # BUG: *= zeroes the padding queries' weights in the caller's attentions
        per_layer.append(on_cls.sum(dim=(0, 2)) / real.sum())
    return torch.stack(per_layer)
''', "must_lose": ["test_head_scores_hidden_synthetic"], "must_fail_public": ["test_head_scores_public"]},
    {"name": "sep_weights_masked_in_place", "function": "sep_score", "source": '''
def sep_score(attentions, inputs, sep_id):
    is_sep = (inputs["input_ids"] == sep_id)[:, None, None, :]

    def on_sep(a):
        a *= is_sep  # BUG: *= zeroes every other key's weight in the caller's attentions
        return a.sum(-1)

    return mean_over_queries(attentions, on_sep, inputs["attention_mask"].bool())
''', "must_lose": ["test_head_scores_hidden_synthetic"], "must_fail_public": ["test_head_scores_public"]},
    {"name": "self_score_padding_rows_zeroed_in_place", "function": "self_score", "source": '''
def self_score(attentions, inputs):
    real = inputs["attention_mask"].bool()
    per_layer = []
    for attn in attentions:
        attn.masked_fill_(~real[:, None, :, None], 0)  # BUG: zeroes the padding queries' rows in the caller's weights
        per_layer.append(attn.diagonal(dim1=-2, dim2=-1).sum(dim=(0, 2)) / real.sum())  # every query, padding ones now 0
    return torch.stack(per_layer)
''', "must_lose": ["test_head_scores_hidden_synthetic"], "must_fail_public": ["test_head_scores_public"]},
    {"name": "entropy_clamps_the_weights_in_place", "function": "attention_entropy", "source": '''
def attention_entropy(attentions, inputs):
    def entropy(a):
        a.clamp_(min=1e-12)  # BUG: clamp_ writes into the caller's weights (every 0 becomes 1e-12)
        return -(a * a.log()).sum(-1)

    return mean_over_queries(attentions, entropy, inputs["attention_mask"].bool())
''', "must_lose": ["test_entropy_hidden"], "must_fail_public": ["test_entropy_public"]},
]

CORRECT = [
    {"name": "rope_from_the_models_own_rotary_module", "function": "rotary_queries_and_keys", "source": '''
def rotary_queries_and_keys(model, inputs, layer, head):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    hidden = model(**inputs, output_hidden_states=True).hidden_states[layer]
    block = model.model.layers[layer]
    x = block.input_layernorm(hidden)
    B, T, _ = x.shape
    c = model.config
    q = block.self_attn.q_proj(x).view(B, T, c.num_attention_heads, c.head_dim).transpose(1, 2)
    k = block.self_attn.k_proj(x).view(B, T, c.num_key_value_heads, c.head_dim).transpose(1, 2)
    k = k.repeat_interleave(c.num_attention_heads // c.num_key_value_heads, dim=1)  # one key head per query head
    positions = torch.arange(T)[None].expand(B, T)
    cos, sin = model.model.rotary_emb(x, positions)
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    return q[:, head], k[:, head]
'''},
    {"name": "causal_float64_einsum_finite_mask", "function": "causal_attention_from_qk", "source": '''
def causal_attention_from_qk(model, inputs, layer, head):
    q, k = rotary_queries_and_keys(model, inputs, layer, head)
    q, k = q.double(), k.double()
    T = q.shape[1]
    scores = torch.einsum("btd,bsd->bts", q, k) / q.shape[-1] ** 0.5
    later = torch.arange(T)[None, :] > torch.arange(T)[:, None]
    padding = inputs["attention_mask"][:, None, :] == 0
    scores = scores.masked_fill(later[None] | padding, torch.finfo(torch.float64).min)
    return torch.softmax(scores, dim=-1).float()
'''},
    {"name": "bert_reshaped_heads_old_style_mask_float64", "function": "attention_from_qk", "source": '''
def attention_from_qk(model, inputs, layer, head):
    hidden = model(**inputs, output_hidden_states=True).hidden_states[layer]
    attention = model.encoder.layer[layer].attention.self
    B, T, _ = hidden.shape
    heads = model.config.num_attention_heads
    q = attention.query(hidden).view(B, T, heads, -1).permute(0, 2, 1, 3).double()
    k = attention.key(hidden).view(B, T, heads, -1).permute(0, 2, 1, 3).double()
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = scores + (1.0 - inputs["attention_mask"][:, None, None, :].double()) * -10000.0  # BERT's original mask
    return F.softmax(scores, dim=-1)[:, head]  # float64
'''},
    {"name": "is_causal_masked_select", "function": "is_causal", "source": '''
def is_causal(attn):
    T = attn.shape[-1]
    above = torch.ones(T, T, dtype=torch.bool).triu(1).expand(attn.shape)
    return torch.all(attn.masked_select(above) <= 1e-6).item()
'''},
    {"name": "key_cosines_with_hooks_in_float64", "function": "key_cosines", "source": '''
def key_cosines(model, tokenizer, sentence_a, sentence_b, word):
    token = tokenizer.convert_tokens_to_ids(word)
    per_sentence = []
    for sentence in (sentence_a, sentence_b):
        inputs = tokenizer(sentence, return_tensors="pt")
        ids = inputs["input_ids"][0].tolist()
        if token not in ids:
            raise ValueError(f"the word {word!r} does not occur in {sentence!r}")
        keys = []
        hooks = [layer.attention.self.key.register_forward_hook(lambda module, args, out: keys.append(out[0]))
                 for layer in model.encoder.layer]
        try:
            model(**inputs)
        finally:
            for hook in hooks:
                hook.remove()
        per_sentence.append(torch.stack(keys)[:, ids.index(token)].double())
    a, b = per_sentence
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
'''},
    {"name": "scores_with_explicit_loops", "edits": [
        ("previous_token_score", '''
def previous_token_score(attentions, inputs):
    lengths = inputs["attention_mask"].sum(dim=1).tolist()
    out = []
    for attn in attentions:
        total, count = torch.zeros(attn.shape[1], dtype=torch.float64), 0
        for b, n in enumerate(lengths):
            for t in range(1, n):
                total += attn[b, :, t, t - 1].double()
                count += 1
        out.append(total / count)
    return torch.stack(out)
'''),
        ("next_token_score", '''
def next_token_score(attentions, inputs):
    lengths = inputs["attention_mask"].sum(dim=1).tolist()
    out = []
    for attn in attentions:
        total, count = torch.zeros(attn.shape[1], dtype=torch.float64), 0
        for b, n in enumerate(lengths):
            for t in range(n - 1):
                total += attn[b, :, t, t + 1].double()
                count += 1
        out.append(total / count)
    return torch.stack(out)
'''),
        ("sep_score", '''
def sep_score(attentions, inputs, sep_id):
    real = inputs["attention_mask"].bool()
    seps = inputs["input_ids"] == sep_id
    out = []
    for attn in attentions:
        on_sep = torch.einsum("bhqk,bk->bhq", attn.double(), seps.double())
        out.append(on_sep.permute(1, 0, 2)[:, real].mean(dim=-1))
    return torch.stack(out)
'''),
    ]},
    {"name": "cls_self_and_entropy_by_boolean_indexing", "edits": [
        ("cls_score", '''
def cls_score(attentions, inputs):
    real = inputs["attention_mask"].bool()
    return torch.stack([a[..., 0].permute(1, 0, 2)[:, real].mean(dim=-1) for a in attentions])
'''),
        ("self_score", '''
def self_score(attentions, inputs):
    real = inputs["attention_mask"].bool()
    return torch.stack([torch.diagonal(a, dim1=2, dim2=3).permute(1, 0, 2)[:, real].mean(dim=-1) for a in attentions])
'''),
        ("attention_entropy", '''
def attention_entropy(attentions, inputs):
    real = inputs["attention_mask"].bool()
    rows = []
    for a in attentions:
        p = a.double()
        h = -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1)
        rows.append(h.permute(1, 0, 2)[:, real].mean(dim=-1))
    return torch.stack(rows)
'''),
    ]},
]

# A notebook takes about 20 s to grade: known-wrong variants share notebooks where no test one must
# fail reaches a function another replaces (``pack_wrong``); correct alternatives are packed together.
pack_wrong(WRONG, master("visualizing_attention"))
pack_correct(CORRECT)
