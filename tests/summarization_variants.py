"""Known-wrong and known-correct implementations for the ``summarization`` assignment.

Pure data, no tests; the contract of ``kernel_attention_variants``:

* every ``WRONG`` entry must fail each hidden test named in ``must_lose``, and each public check
  named in ``must_fail_public`` (so the student sees the bug before submitting); an entry with
  ``must_keep`` must also pass those hidden tests (it is graded alone, so nothing else can fail
  them): a wrong attention scale or a wrong mask costs the parts that use it, not the others;
* every ``CORRECT`` entry must pass every hidden test and every public check.

Sources may use what the notebook's setup cell imports (``math``, ``torch``, ``nn``, ``F``) and the
other functions and classes the students write. Many are the master's own definition with one edit
(``_edited``), so they follow the reference and its given lines as those change.
"""

import ast

from tests.support.notebook_edits import master, pack_correct, pack_wrong


def _definition(name: str) -> str:
    """The master's top-level ``def`` or ``class`` ``name`` (one definition, not its whole cell), without
    the solution markers and the TODO comments."""
    for cell in master("summarization").cells:
        if cell.cell_type != "code" or "TEST CONFIG" in cell.source:
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                lines = cell.source.splitlines()[node.lineno - 1:node.end_lineno]
                return "\n".join(line for line in lines if not line.strip().startswith(
                    ("# BEGIN SOLUTION", "# END SOLUTION", "# TODO", "#   ")))
    raise ValueError(f"no top-level definition of {name} in the master")


def _edited(name: str, function: str, *edits: tuple[str, str], **fields) -> dict:
    """A variant of ``function``: the master's definition with each ``(old, new)`` replaced once."""
    source = _definition(function)
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"{name}: {old!r} is not once in the reference {function}")
        source = source.replace(old, new)
    return {"name": name, "function": function, "source": source, **fields}


#: The given lines of ``Summarizer.decode`` for the cached case (the same mask as without a cache).
_GIVEN_CACHED_MASK = """        if caches is not None:  # given: the new tokens' rows of the same mask, over the summary so far
            if len(caches) == len(self.decoder):  # the first step: one more dict keeps the tokens so far
                caches.append({})
            so_far = caches[-1].get("tokens", tgt_in[:, :0])
            start = so_far.shape[1]  # the new tokens are at positions start, start + 1, ...
            caches[-1]["tokens"] = torch.cat([so_far, tgt_in], dim=1)  # (B, start + Tt)
            self_mask = decoder_self_attention_mask(caches[-1]["tokens"], self.pad_id)[:, start:]  # (B, Tt, start + Tt)
"""

#: The reference's restriction of the next token's logits (temperature, top-k, nucleus) and its draw.
_SAMPLING_STEP = """        logits = model(src, tokens)[:, -1].double() / temperature
        if top_k is not None:
            kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if top_p is not None:
            probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
            before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above
            drop = torch.zeros_like(logits, dtype=torch.bool).scatter(1, order, before >= top_p)
            logits = logits.masked_fill(drop, float("-inf"))
"""
_TOP_K = """        if top_k is not None:
            kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
"""
_TOP_P = """        if top_p is not None:
            probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
            before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above
            drop = torch.zeros_like(logits, dtype=torch.bool).scatter(1, order, before >= top_p)
            logits = logits.masked_fill(drop, float("-inf"))
"""
assert _SAMPLING_STEP == "        logits = model(src, tokens)[:, -1].double() / temperature\n" + _TOP_K + _TOP_P

#: Hidden tests that use neither the attention nor the masks the students write.
INDEPENDENT_OF_ATTENTION = [
    "test_positions_hidden_encoding", "test_positions_hidden_shift", "test_loss_hidden",
    "test_greedy_hidden", "test_sampling_hidden_top_k_and_structure", "test_sampling_hidden_frequencies",
    "test_beam_hidden_width_one_and_exhaustive", "test_beam_hidden_widths", "test_model_hidden_embedding",
    "test_sampling_hidden_options_combined", "test_sampling_hidden_generator",
]

WRONG = [
    # ---------------------------------------------------------------- attention
    {
        "name": "attention_without_scale",
        "function": "scaled_dot_product_attention",
        "source": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)  # BUG: not divided by sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
''',
        "must_lose": ["test_attention_hidden_values", "test_attention_hidden_masks",
                      "test_multihead_hidden_matches_torch", "test_layers_hidden_encoder", "test_layers_hidden_decoder"],
        "must_fail_public": ["test_attention_public", "test_multihead_public", "test_layers_public"],
        "must_keep": INDEPENDENT_OF_ATTENTION + ["test_masks_hidden", "test_multihead_hidden_cache",
                                                 "test_model_hidden_properties", "test_model_hidden_cache", "test_cache_hidden"],
    },
    {
        "name": "attention_softmax_over_queries",
        "function": "scaled_dot_product_attention",
        "source": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)  # BUG: normalized over the queries
    return weights @ v, weights
''',
        "must_lose": ["test_attention_hidden_values", "test_multihead_hidden_matches_torch"],
        "must_fail_public": ["test_attention_public"],
    },
    {
        "name": "attention_mask_inverted",
        "function": "scaled_dot_product_attention",
        "source": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # BUG: removes the allowed keys
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
''',
        "must_lose": ["test_attention_hidden_masks"],
        "must_fail_public": ["test_attention_public"],
    },
    {
        "name": "attention_mask_after_softmax",
        "function": "scaled_dot_product_attention",
        "source": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights * mask  # BUG: zeroed after the softmax, rows no longer sum to 1
    return weights @ v, weights
''',
        "must_lose": ["test_attention_hidden_masks"],
        "must_fail_public": ["test_attention_public"],
    },
    # ---------------------------------------------------------------- positions
    {
        "name": "positions_in_two_halves",
        "function": "sinusoidal_positional_encoding",
        "source": '''
def sinusoidal_positional_encoding(T, d):
    t = torch.arange(T, dtype=torch.float32)[:, None]
    w = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    return torch.cat([torch.sin(t * w), torch.cos(t * w)], dim=1)  # BUG: sines then cosines, not interleaved
''',
        "must_lose": ["test_positions_hidden_encoding"],
        "must_fail_public": ["test_positions_public"],
    },
    {
        "name": "positions_frequency_without_the_2",
        "function": "sinusoidal_positional_encoding",
        "source": '''
def sinusoidal_positional_encoding(T, d):
    t = torch.arange(T, dtype=torch.float32)[:, None]
    w = 1.0 / 10000 ** (torch.arange(d // 2, dtype=torch.float32) / d)  # BUG: i/d instead of 2i/d
    pe = torch.zeros(T, d)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(t * w), torch.cos(t * w)
    return pe
''',
        "must_lose": ["test_positions_hidden_encoding"],
        "must_fail_public": ["test_positions_public"],
    },
    {
        "name": "shift_matrix_rotates_backwards",
        "function": "relative_shift_matrix",
        "source": '''
def relative_shift_matrix(d):
    M = torch.zeros(d, d)
    for i in range(d // 2):
        w = torch.tensor(1.0 / 10000 ** (2 * i / d))
        c, s = torch.cos(w), torch.sin(w)
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c, -s  # BUG: the transpose: p_(t-1) = M p_t
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = s, c
    return M
''',
        "must_lose": ["test_positions_hidden_shift"],
        "must_fail_public": ["test_positions_public"],
    },
    # ---------------------------------------------------------------- multi-head attention
    {
        "name": "multihead_split_without_transpose",
        "function": "MultiHeadAttention",
        "source": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.v_proj, self.out_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None, cache=None):
        B, Tq, D = query.shape
        split = lambda x: x.reshape(B, self.num_heads, x.shape[1], self.d_head)  # BUG: mixes positions and heads
        q, k, v = split(self.q_proj(query)), split(self.k_proj(key)), split(self.v_proj(value))
        if cache is not None:
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
            cache["k"], cache["v"] = k, v
        if mask is not None and mask.dim() == 3:
            mask = mask[:, None]
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        return self.out_proj(out.reshape(B, Tq, D)), weights
''',
        "must_lose": ["test_multihead_hidden_matches_torch"],
        "must_fail_public": ["test_multihead_public"],
    },
    {
        "name": "multihead_cache_overwritten",
        "function": "MultiHeadAttention",
        "source": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_head = num_heads, d_model // num_heads
        self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.v_proj, self.out_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None, cache=None):
        B, Tq, D = query.shape
        split = lambda x: x.view(B, x.shape[1], self.num_heads, self.d_head).transpose(1, 2)
        q, k, v = split(self.q_proj(query)), split(self.k_proj(key)), split(self.v_proj(value))
        if cache is not None:
            cache["k"], cache["v"] = k, v  # BUG: forgets the earlier tokens
        if mask is not None and mask.dim() == 3:
            mask = mask[:, None]
        if mask is not None and mask.shape[-1] != k.shape[-2]:
            mask = mask[..., -k.shape[-2]:]
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        return self.out_proj(out.transpose(1, 2).reshape(B, Tq, D)), weights
''',
        "must_lose": ["test_multihead_hidden_cache"],
        "must_fail_public": ["test_multihead_public"],
    },
    # ---------------------------------------------------------------- masks
    {
        "name": "padding_mask_inverted",
        "function": "padding_mask",
        "source": '''
def padding_mask(tokens, pad_id):
    return tokens == pad_id  # BUG: True at the padding
''',
        "must_lose": ["test_masks_hidden", "test_model_hidden_properties"],
        "must_fail_public": ["test_masks_public"],
        "must_keep": INDEPENDENT_OF_ATTENTION + ["test_attention_hidden_values", "test_attention_hidden_masks",
                                                 "test_multihead_hidden_matches_torch", "test_multihead_hidden_cache",
                                                 "test_layers_hidden_encoder", "test_layers_hidden_decoder"],
    },
    {
        "name": "causal_mask_sees_the_future",
        "function": "causal_mask",
        "source": '''
def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).triu()  # BUG: the transpose: queries see later keys
''',
        "must_lose": ["test_masks_hidden"],
        "must_fail_public": ["test_masks_public"],
    },
    {
        "name": "decoder_mask_masks_padding_queries",
        "function": "decoder_self_attention_mask",
        "source": '''
def decoder_self_attention_mask(tgt, pad_id):
    real = padding_mask(tgt, pad_id)
    return causal_mask(tgt.shape[1])[None] & real[:, :, None]  # BUG: masks padding rows, not padding keys
''',
        "must_lose": ["test_masks_hidden"],
        "must_fail_public": ["test_masks_public"],
    },
    {
        "name": "cross_mask_from_the_summary",
        "function": "cross_attention_mask",
        "source": '''
def cross_attention_mask(src, tgt, pad_id):
    return padding_mask(tgt, pad_id)[:, :, None].expand(-1, -1, src.shape[1])  # BUG: the summary's padding
''',
        "must_lose": ["test_masks_hidden"],
        "must_fail_public": ["test_masks_public"],
    },
    # ---------------------------------------------------------------- layers and model
    {
        "name": "encoder_layer_pre_norm",
        "function": "EncoderLayer",
        "source": '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        h = self.norm1(x)  # BUG: pre-LN, not the post-LN layer of the original transformer
        x = x + self.dropout(self.self_attn(h, h, h, mask)[0])
        return x + self.dropout(self.linear2(F.relu(self.linear1(self.norm2(x)))))
''',
        "must_lose": ["test_layers_hidden_encoder"],
        "must_fail_public": ["test_layers_public"],
    },
    {
        "name": "decoder_layer_cross_attention_without_residual",
        "function": "DecoderLayer",
        "source": '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn, self.cross_attn = MultiHeadAttention(d_model, num_heads), MultiHeadAttention(d_model, num_heads)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.cross_weights = None

    def forward(self, x, memory, self_mask=None, cross_mask=None, cache=None):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, self_mask, cache=cache)[0]))
        attended, self.cross_weights = self.cross_attn(x, memory, memory, cross_mask)
        x = self.norm2(self.dropout(attended))  # BUG: the residual x + ... is missing
        return self.norm3(x + self.dropout(self.linear2(F.relu(self.linear1(x)))))
''',
        "must_lose": ["test_layers_hidden_decoder"],
        "must_fail_public": ["test_layers_public"],
    },
    {
        "name": "embeddings_not_scaled",
        "function": "Summarizer",
        "source": '''
class Summarizer(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, pad_id, dropout=0.1):
        super().__init__()
        self.pad_id, self.d_model = pad_id, d_model
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.register_buffer("positions", sinusoidal_positional_encoding(max_len, d_model), persistent=False)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.out = nn.Linear(d_model, vocab_size)
        self.dropout = nn.Dropout(dropout)

    def embed_tokens(self, tokens, start=0):
        return self.dropout(self.embed(tokens) + self.positions[start: start + tokens.shape[1]])  # BUG: no sqrt(d_model)

    def encode(self, src):
        mask = padding_mask(src, self.pad_id)[:, None, :].expand(-1, src.shape[1], -1)
        x = self.embed_tokens(src)
        for layer in self.encoder:
            x = layer(x, mask)
        return x

    def decode(self, memory, src, tgt_in, caches=None):
        if caches is not None:  # the given lines
            if len(caches) == len(self.decoder):
                caches.append({})
            so_far = caches[-1].get("tokens", tgt_in[:, :0])
            start = so_far.shape[1]
            caches[-1]["tokens"] = torch.cat([so_far, tgt_in], dim=1)
            self_mask = decoder_self_attention_mask(caches[-1]["tokens"], self.pad_id)[:, start:]
        else:
            start = 0
            self_mask = decoder_self_attention_mask(tgt_in, self.pad_id)
        cross_mask = cross_attention_mask(src, tgt_in, self.pad_id)
        x = self.embed_tokens(tgt_in, start)
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory, self_mask, cross_mask, cache=None if caches is None else caches[i])
        return self.out(x)

    def forward(self, src, tgt_in):
        return self.decode(self.encode(src), src, tgt_in)
''',
        "must_lose": ["test_model_hidden_embedding"],
        "must_fail_public": ["test_model_public"],
    },
    _edited("encode_throws_the_layers_outputs_away", "Summarizer",
            ("            x = layer(x, mask)\n        return x",
             "            layer(x, mask)  # BUG: the output is thrown away: the encoder is the embedding alone\n        return x"),
            must_lose=["test_model_hidden_named_weights"], must_fail_public=["test_model_public"]),
    _edited("decoder_layer_norm2_for_the_feed_forward", "DecoderLayer",
            ("return self.norm3(x + self.dropout(self.linear2(self.dropout(F.relu(self.linear1(x))))))",
             "return self.norm2(x + self.dropout(self.linear2(self.dropout(F.relu(self.linear1(x))))))  # BUG: norm2 again"),
            # with default LayerNorm weights norm2 and norm3 are the same function: the checks give each its own
            must_lose=["test_layers_hidden_decoder", "test_model_hidden_named_weights"], must_fail_public=["test_layers_public"]),
    _edited("decoder_layer_cross_weights_averaged_over_heads", "DecoderLayer",
            ("        attended, self.cross_weights = self.cross_attn(x, memory, memory, cross_mask)\n",
             "        attended, weights = self.cross_attn(x, memory, memory, cross_mask)\n"
             "        self.cross_weights = weights.mean(1)  # BUG: (B, Tt, Ts), not (B, heads, Tt, Ts)\n"),
            must_lose=["test_layers_hidden_cross_weights"], must_fail_public=["test_layers_public"]),
    _edited("cached_decoding_without_the_summarys_padding", "Summarizer",  # the given cached lines before issue 27
            (_GIVEN_CACHED_MASK,
             "        if caches is not None:  # BUG: a pad_id written in mid-summary is a key here, masked without the cache\n"
             "            start = caches[0][\"k\"].shape[2] if \"k\" in caches[0] else 0\n"
             "            T = tgt_in.shape[1]\n"
             "            self_mask = torch.ones(T, start + T, dtype=torch.bool, device=src.device).tril(start)\n"),
            must_lose=["test_model_hidden_cache", "test_cache_hidden"], must_fail_public=["test_model_public", "test_cache_public"]),
    _edited("decoding_without_cache_masks_only_the_future", "Summarizer",
            ("            self_mask = decoder_self_attention_mask(tgt_in, self.pad_id)\n",
             "            self_mask = causal_mask(tgt_in.shape[1])  # BUG: a pad_id in mid-summary is a key here, masked with the cache\n"),
            must_lose=["test_model_hidden_cache", "test_cache_hidden"], must_fail_public=["test_model_public", "test_cache_public"]),
    # ---------------------------------------------------------------- loss
    {
        "name": "loss_counts_padding",
        "function": "sequence_loss",
        "source": '''
def sequence_loss(logits, targets, pad_id):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))  # BUG: pads count
''',
        "must_lose": ["test_loss_hidden"],
        "must_fail_public": ["test_loss_public"],
    },
    {
        "name": "loss_mean_per_summary",
        "function": "sequence_loss",
        "source": '''
def sequence_loss(logits, targets, pad_id):
    per_token = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=pad_id, reduction="none")
    real = (targets != pad_id).to(per_token.dtype)
    return ((per_token * real).sum(1) / real.sum(1)).mean()  # BUG: short summaries weigh more
''',
        "must_lose": ["test_loss_hidden"],
        "must_fail_public": ["test_loss_public"],
    },
    # ---------------------------------------------------------------- decoding
    {
        "name": "greedy_keeps_writing_after_eos",
        "function": "greedy_decode",
        "source": '''
def greedy_decode(model, src, max_len, bos_id, eos_id, use_cache=False):
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    for _ in range(max_len):
        next_token = model(src, tokens)[:, -1].argmax(-1)  # BUG: a finished row goes on after eos
        tokens = torch.cat([tokens, next_token[:, None]], 1)
        if (tokens == eos_id).any(1).all():
            break
    return tokens
''',
        "must_lose": ["test_greedy_hidden"],
        "must_fail_public": ["test_greedy_public"],
    },
    {
        "name": "greedy_one_token_too_many",
        "function": "greedy_decode",
        "source": '''
def greedy_decode(model, src, max_len, bos_id, eos_id, use_cache=False):
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len + 1):  # BUG: max_len + 1 tokens after bos
        next_token = model(src, tokens)[:, -1].argmax(-1).masked_fill(finished, eos_id)
        tokens = torch.cat([tokens, next_token[:, None]], 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return tokens
''',
        "must_lose": ["test_greedy_hidden"],
        "must_fail_public": ["test_greedy_public"],
    },
    {
        "name": "cached_decoding_recomputes",
        "function": "greedy_decode_cached",
        "source": '''
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        next_token = model(src, tokens)[:, -1].argmax(-1).masked_fill(finished, eos_id)  # BUG: no cache at all
        tokens = torch.cat([tokens, next_token[:, None]], 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return tokens
''',
        "must_lose": ["test_cache_hidden"],
        "must_fail_public": ["test_cache_public"],
    },
    {
        "name": "sampling_multiplies_by_temperature",
        "function": "sample_decode",
        "source": '''
def sample_decode(model, src, max_len, bos_id, eos_id, temperature=1.0, top_k=None, top_p=None, generator=None):
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        logits = model(src, tokens)[:, -1] * temperature  # BUG: multiplied, not divided
        if top_k is not None:
            logits = logits.masked_fill(logits < logits.topk(top_k, -1).values[:, -1:], float("-inf"))
        if top_p is not None:
            probs, order = torch.softmax(logits, -1).sort(-1, descending=True)
            drop = torch.zeros_like(logits, dtype=torch.bool).scatter(1, order, probs.cumsum(-1) - probs >= top_p)
            logits = logits.masked_fill(drop, float("-inf"))
        next_token = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0].masked_fill(finished, eos_id)
        tokens = torch.cat([tokens, next_token[:, None]], 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return tokens
''',
        "must_lose": ["test_sampling_hidden_frequencies"],
        "must_fail_public": ["test_sampling_public"],
    },
    {
        "name": "sampling_top_p_drops_the_crossing_token",
        "function": "sample_decode",
        "source": '''
def sample_decode(model, src, max_len, bos_id, eos_id, temperature=1.0, top_k=None, top_p=None, generator=None):
    tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        logits = model(src, tokens)[:, -1] / temperature
        if top_k is not None:
            logits = logits.masked_fill(logits < logits.topk(top_k, -1).values[:, -1:], float("-inf"))
        if top_p is not None:
            probs, order = torch.softmax(logits, -1).sort(-1, descending=True)
            # BUG: drops the token whose probability crosses top_p (and with it everything, if it is the first)
            drop = torch.zeros_like(logits, dtype=torch.bool).scatter(1, order, probs.cumsum(-1) > top_p)
            logits = logits.masked_fill(drop, float("-inf"))
        next_token = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0].masked_fill(finished, eos_id)
        tokens = torch.cat([tokens, next_token[:, None]], 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return tokens
''',
        "must_lose": ["test_sampling_hidden_frequencies"],
        "must_fail_public": ["test_sampling_public"],
    },
    {
        "name": "beam_drops_finished_hypotheses",
        "function": "beam_search",
        "source": '''
def beam_search(model, src, max_len, bos_id, eos_id, beam_size):
    rows = []
    for b in range(src.shape[0]):
        beams, done = [([bos_id], 0.0)], []
        for _ in range(max_len):
            if not beams:
                break
            logp = torch.log_softmax(model(src[b:b + 1].expand(len(beams), -1), torch.tensor([t for t, _ in beams]))[:, -1].double(), -1)
            top = logp.topk(min(beam_size, logp.shape[-1]), -1)
            candidates = [(t + [tok], s + v) for (t, s), vs, toks in zip(beams, top.values.tolist(), top.indices.tolist())
                          for v, tok in zip(vs, toks)]
            candidates.sort(key=lambda c: -c[1])
            done += [c for c in candidates[:beam_size] if c[0][-1] == eos_id]
            beams = [c for c in candidates[:beam_size] if c[0][-1] != eos_id]  # BUG: finished ones leave
        pool = beams or done  # prefers any unfinished hypothesis over every finished one
        rows.append(max(pool, key=lambda c: c[1])[0])
    length = max(len(r) for r in rows)
    return torch.tensor([r + [eos_id] * (length - len(r)) for r in rows])
''',
        "must_lose": ["test_beam_hidden_width_one_and_exhaustive", "test_beam_hidden_widths"],
        "must_fail_public": ["test_beam_public"],
    },
    {
        # issue 46: finished hypotheses set aside while the places go to unfinished extensions (the
        # beam_size best of all extensions kept, the finished among them set aside)
        "name": "beam_sets_finished_aside_within_the_places",
        "function": "beam_search",
        "source": '''
def beam_search(model, src, max_len, bos_id, eos_id, beam_size):
    rows = []
    for b in range(src.shape[0]):
        beams, finished = [([bos_id], 0.0)], []
        for _ in range(max_len):
            if not beams:
                break
            logp = torch.log_softmax(model(src[b:b + 1].expand(len(beams), -1), torch.tensor([t for t, _ in beams]))[:, -1].double(), -1)
            top = logp.topk(min(beam_size, logp.shape[-1]), -1)
            candidates = sorted(((t + [tok], s + v) for (t, s), vs, toks in zip(beams, top.values.tolist(), top.indices.tolist())
                                 for v, tok in zip(vs, toks)), key=lambda c: -c[1])[:beam_size]
            finished += [c for c in candidates if c[0][-1] == eos_id]  # BUG: set aside, their places refilled next step
            beams = [c for c in candidates if c[0][-1] != eos_id]
        rows.append(max(finished + beams, key=lambda c: c[1])[0])
    length = max(len(r) for r in rows)
    return torch.tensor([r + [eos_id] * (length - len(r)) for r in rows])
''',
        "must_lose": ["test_beam_hidden_widths"],
        "must_fail_public": ["test_beam_public"],
    },
    {
        "name": "beam_keeps_best_per_hypothesis_only",
        "function": "beam_search",
        "source": '''
def beam_search(model, src, max_len, bos_id, eos_id, beam_size):
    rows = []
    for b in range(src.shape[0]):
        beams = [([bos_id], 0.0, False)]
        for _ in range(max_len):
            if all(f for _, _, f in beams):
                break
            candidates = [beam for beam in beams if beam[2]]
            for tokens, score, finished in beams:
                if finished:
                    continue
                logp = torch.log_softmax(model(src[b:b + 1], torch.tensor([tokens]))[0, -1].double(), -1)
                value, token = logp.max(-1)  # BUG: one extension per hypothesis
                candidates.append((tokens + [int(token)], score + float(value), int(token) == eos_id))
            if len(beams) == 1:
                logp = torch.log_softmax(model(src[b:b + 1], torch.tensor([beams[0][0]]))[0, -1].double(), -1)
                top = logp.topk(min(beam_size, logp.shape[-1]))
                candidates = [(beams[0][0] + [t], beams[0][1] + v, t == eos_id) for v, t in zip(top.values.tolist(), top.indices.tolist())]
            beams = sorted(candidates, key=lambda c: -c[1])[:beam_size]
        rows.append(max(beams, key=lambda c: c[1])[0])
    length = max(len(r) for r in rows)
    return torch.tensor([r + [eos_id] * (length - len(r)) for r in rows])
''',
        "must_lose": ["test_beam_hidden_widths"],
        "must_fail_public": ["test_beam_public"],  # the tree and the greedy checks give the same answers; early ends do not
    },
    _edited("sampling_top_p_before_top_k", "sample_decode",
            (_TOP_K + _TOP_P, "        # BUG: the nucleus of all the tokens, then top-k\n" + _TOP_P + _TOP_K),
            must_lose=["test_sampling_hidden_options_combined"], must_fail_public=["test_sampling_public"]),
    _edited("sampling_top_p_first", "sample_decode",  # the nucleus of the raw logits, then the temperature and top-k
            (_SAMPLING_STEP, "        logits = model(src, tokens)[:, -1].double()  # BUG: the nucleus comes first\n" + _TOP_P
             + "        logits = logits / temperature\n" + _TOP_K),
            must_lose=["test_sampling_hidden_options_combined"], must_fail_public=["test_sampling_public"]),
    _edited("sampling_temperature_after_the_nucleus", "sample_decode",
            ("        logits = model(src, tokens)[:, -1].double() / temperature\n",
             "        logits = model(src, tokens)[:, -1].double()\n"),
            ("next_token = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]",
             "next_token = torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator)[:, 0]  # BUG: late"),
            must_lose=["test_sampling_hidden_options_combined"], must_fail_public=["test_sampling_public"]),
    _edited("sampling_top_k_skipped_with_top_p", "sample_decode",
            ("        if top_k is not None:\n", "        if top_k is not None and top_p is None:  # BUG: one or the other\n"),
            must_lose=["test_sampling_hidden_options_combined"], must_fail_public=["test_sampling_public"]),
    _edited("sampling_ignores_the_generator", "sample_decode",
            ("next_token = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[:, 0]",
             "next_token = torch.multinomial(torch.softmax(logits, dim=-1), 1)[:, 0]  # BUG: torch's global random state"),
            must_lose=["test_sampling_hidden_generator"], must_fail_public=["test_sampling_public"]),
    {
        "name": "beam_sets_finished_hypotheses_aside",
        "function": "beam_search",
        "source": '''
def beam_search(model, src, max_len, bos_id, eos_id, beam_size):
    rows = []
    for b in range(src.shape[0]):
        beams, done = [([bos_id], 0.0)], []
        for _ in range(max_len):
            if not beams:
                break
            logp = torch.log_softmax(model(src[b:b + 1].expand(len(beams), -1), torch.tensor([t for t, _ in beams]))[:, -1].double(), -1)
            top = logp.topk(min(beam_size, logp.shape[-1]), -1)
            candidates = [(t + [tok], s + v) for (t, s), vs, toks in zip(beams, top.values.tolist(), top.indices.tolist())
                          for v, tok in zip(vs, toks)]
            candidates.sort(key=lambda c: -c[1])
            done += [c for c in candidates if c[0][-1] == eos_id]  # BUG: finished ones are set aside, and the
            beams = [c for c in candidates if c[0][-1] != eos_id][:beam_size]  # k places all go to unfinished ones
        rows.append(max(done + beams, key=lambda c: c[1])[0])
    length = max(len(r) for r in rows)
    return torch.tensor([r + [eos_id] * (length - len(r)) for r in rows])
''',
        "must_lose": ["test_beam_hidden_widths"],
        "must_fail_public": ["test_beam_public"],
    },
    # ---------------------------------------------------------------- the course's rule: inputs stay as they are
    # Each returns the right values and changes a tensor it is given: only the check of its arguments,
    # in the hidden test named, tells it from the reference (the tests hand copies where they use an
    # input again). Most break their callers, as such a bug does: several stop the training of Part 7
    # (autograd finds that a tensor it saved has changed), the decoders' writes change the articles.
    {
        "name": "attention_scales_q_in_place",
        "function": "scaled_dot_product_attention",
        "source": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    q = q.mul_(1 / math.sqrt(q.shape[-1]))  # BUG: scales the caller's q in place
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
''',
        "must_lose": ["test_attention_hidden_masks"],
        "must_fail_public": ["test_attention_public"],
    },
    _edited("multihead_merges_the_heads_into_the_query", "MultiHeadAttention",
            ("out = out.transpose(1, 2).reshape(B, Tq, self.num_heads * self.d_head)",
             "out = query.copy_(out.transpose(1, 2).reshape(B, Tq, self.num_heads * self.d_head))  # BUG: into the caller's query"),
            must_lose=["test_multihead_hidden_matches_torch"], must_fail_public=["test_multihead_public"]),
    {
        "name": "padding_mask_compares_in_place",
        "function": "padding_mask",
        "source": '''
def padding_mask(tokens, pad_id):
    return tokens.ne_(pad_id).bool()  # BUG: ne_ compares in place: the caller's tokens become 0s and 1s
''',
        "must_lose": ["test_masks_hidden"],
        "must_fail_public": ["test_masks_public"],
    },
    {
        "name": "decoder_mask_compares_in_place",
        "function": "decoder_self_attention_mask",
        "source": '''
def decoder_self_attention_mask(tgt, pad_id):
    real = tgt.ne_(pad_id).bool()  # BUG: ne_ compares in place: the caller's tgt becomes 0s and 1s
    return causal_mask(tgt.shape[1]).to(tgt.device)[None] & real[:, None, :]
''',
        "must_lose": ["test_masks_hidden"],
        "must_fail_public": ["test_masks_public"],
    },
    {
        "name": "cross_mask_compares_in_place",
        "function": "cross_attention_mask",
        "source": '''
def cross_attention_mask(src, tgt, pad_id):
    real = src.ne_(pad_id).bool()  # BUG: ne_ compares in place: the caller's src becomes 0s and 1s
    return real[:, None, :].expand(-1, tgt.shape[1], -1)
''',
        "must_lose": ["test_masks_hidden"],
        "must_fail_public": ["test_masks_public"],
    },
    _edited("encoder_layer_adds_the_residual_in_place", "EncoderLayer",
            ("        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)[0]))\n",
             "        x += self.dropout(self.self_attn(x, x, x, mask)[0])  # BUG: the residual goes into the caller's x\n"
             "        x = self.norm1(x)\n"),
            must_lose=["test_layers_hidden_encoder"], must_fail_public=["test_layers_public"]),
    _edited("decoder_layer_adds_the_residual_in_place", "DecoderLayer",
            ("        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, self_mask, cache=cache)[0]))\n",
             "        x += self.dropout(self.self_attn(x, x, x, self_mask, cache=cache)[0])  # BUG: into the caller's x\n"
             "        x = self.norm1(x)\n"),
            must_lose=["test_layers_hidden_decoder"], must_fail_public=["test_layers_public"]),
    _edited("model_writes_its_predictions_into_tgt_in", "Summarizer",
            ("        return self.out(x)\n",
             "        logits = self.out(x)\n"
             "        tgt_in.copy_(logits.argmax(-1))  # BUG: the predicted tokens written over the caller's tgt_in\n"
             "        return logits\n"),
            must_lose=["test_model_hidden_named_weights"], must_fail_public=["test_model_public"]),
    {
        "name": "loss_marks_padding_in_the_targets",
        "function": "sequence_loss",
        "source": '''
def sequence_loss(logits, targets, pad_id):
    targets[targets == pad_id] = -100  # BUG: cross_entropy's default ignore_index, written into the caller's targets
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
''',
        "must_lose": ["test_loss_hidden"],
        "must_fail_public": ["test_loss_public"],
    },
    _edited("greedy_ends_the_articles_with_eos", "greedy_decode",
            ("    return tokens", "    src[:, -1] = eos_id  # BUG: written into the caller's articles (after decoding)\n    return tokens"),
            must_lose=["test_greedy_hidden"], must_fail_public=["test_greedy_public"]),
    _edited("sampling_ends_the_articles_with_eos", "sample_decode",
            ("    return tokens", "    src[:, -1] = eos_id  # BUG: written into the caller's articles (after decoding)\n    return tokens"),
            must_lose=["test_sampling_hidden_top_k_and_structure"], must_fail_public=["test_sampling_public"]),
    _edited("beam_ends_the_articles_with_eos", "beam_search",
            ("    length = max(len(row) for row in best_rows)\n",
             "    src[:, -1] = eos_id  # BUG: written into the caller's articles (after the searches)\n"
             "    length = max(len(row) for row in best_rows)\n"),
            must_lose=["test_beam_hidden_width_one_and_exhaustive"], must_fail_public=["test_beam_public"]),
    _edited("cached_decoding_ends_the_articles_with_eos", "greedy_decode_cached",
            ("    return tokens", "    src[:, -1] = eos_id  # BUG: written into the caller's articles (after decoding)\n    return tokens"),
            must_lose=["test_cache_hidden"], must_fail_public=["test_cache_public"]),
]

CORRECT = [
    {
        "name": "attention_with_einsum_and_float64",
        "function": "scaled_dot_product_attention",
        "source": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q.double(), k.double()) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    weights = scores.softmax(-1)
    return torch.einsum("...qk,...kv->...qv", weights, v.double()).to(v.dtype), weights.to(q.dtype)
''',
    },
    {
        "name": "positions_by_loops_and_shift_by_block_diag",
        "edits": [
            ("sinusoidal_positional_encoding", '''
def sinusoidal_positional_encoding(T, d):
    pe = torch.zeros(T, d, dtype=torch.float64)
    for t in range(T):
        for i in range(d // 2):
            angle = t * math.exp(-math.log(10000.0) * 2 * i / d)
            pe[t, 2 * i], pe[t, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe.float()
'''),
            ("relative_shift_matrix", '''
def relative_shift_matrix(d):
    blocks = []
    for i in range(d // 2):
        w = 10000.0 ** (-2 * i / d)
        blocks.append(torch.tensor([[math.cos(w), math.sin(w)], [-math.sin(w), math.cos(w)]]))
    return torch.block_diag(*blocks)
'''),
        ],
    },
    {
        "name": "multihead_with_unflatten_and_per_head_masks",
        "function": "MultiHeadAttention",
        "source": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None, cache=None):
        heads = lambda x: x.unflatten(-1, (self.h, -1)).permute(0, 2, 1, 3)
        q, k, v = heads(self.q_proj(query)), heads(self.k_proj(key)), heads(self.v_proj(value))
        if cache is not None:
            cache["k"] = k = k if cache.get("k") is None else torch.cat((cache["k"], k), dim=-2)
            cache["v"] = v = v if cache.get("v") is None else torch.cat((cache["v"], v), dim=-2)
        if mask is not None:
            mask = mask.unsqueeze(-3) if mask.dim() == 3 else mask.expand(query.shape[0], 1, *mask.shape)
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        return self.out_proj(out.permute(0, 2, 1, 3).flatten(-2)), weights
''',
    },
    {
        "name": "masks_by_comparisons",
        "edits": [
            ("padding_mask", '''
def padding_mask(tokens, pad_id):
    return ~(tokens == pad_id)
'''),
            ("causal_mask", '''
def causal_mask(T):
    positions = torch.arange(T)
    return positions[None, :] <= positions[:, None]
'''),
            ("decoder_self_attention_mask", '''
def decoder_self_attention_mask(tgt, pad_id):
    B, T = tgt.shape
    keys = padding_mask(tgt, pad_id).unsqueeze(1).repeat(1, T, 1)
    return keys & causal_mask(T).unsqueeze(0)
'''),
            ("cross_attention_mask", '''
def cross_attention_mask(src, tgt, pad_id):
    return padding_mask(src, pad_id).unsqueeze(1).repeat(1, tgt.shape[1], 1)
'''),
        ],
    },
    {
        "name": "loss_by_hand",
        "function": "sequence_loss",
        "source": '''
def sequence_loss(logits, targets, pad_id):
    log_probs = logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    real = targets != pad_id
    return -(log_probs * real).sum() / real.sum()
''',
    },
    {
        "name": "greedy_with_python_lists",
        "function": "greedy_decode",
        "source": '''
def greedy_decode(model, src, max_len, bos_id, eos_id, use_cache=False):
    rows = [[bos_id] for _ in range(src.shape[0])]
    memory = model.encode(src) if use_cache else None
    caches = [{} for _ in model.decoder] if use_cache else None
    with torch.no_grad():
        for step in range(max_len):
            if all(row[-1] == eos_id for row in rows):
                break
            prefix = torch.tensor(rows)
            if use_cache:
                logits = model.decode(memory, src, prefix[:, -1:], caches)
            else:
                logits = model(src, prefix)
            best = logits[:, -1].argmax(-1).tolist()
            for row, token in zip(rows, best):
                row.append(eos_id if row[-1] == eos_id and len(row) > 1 else token)
    return torch.tensor(rows)
''',
    },
    {
        "name": "sampling_by_inverse_cdf",
        "function": "sample_decode",
        "source": '''
def sample_decode(model, src, max_len, bos_id, eos_id, temperature=1.0, top_k=None, top_p=None, generator=None):
    B = src.shape[0]
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    finished = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        probs = torch.softmax(model(src, tokens)[:, -1].float() / temperature, -1)
        if top_k is not None:
            threshold = probs.sort(-1, descending=True).values[:, top_k - 1:top_k]
            probs = torch.where(probs >= threshold, probs, torch.zeros_like(probs))
            probs = probs / probs.sum(-1, keepdim=True)
        if top_p is not None:
            ranked, order = probs.sort(-1, descending=True)
            keep = torch.cat([torch.ones(B, 1, dtype=torch.bool), ranked.cumsum(-1)[:, :-1] < top_p], 1)
            probs = torch.zeros_like(probs).scatter(1, order, ranked * keep)
            probs = probs / probs.sum(-1, keepdim=True)
        u = torch.rand(B, 1, generator=generator)  # one uniform per row: the generator used differently
        next_token = torch.searchsorted(probs.cumsum(-1), u * probs.sum(-1, keepdim=True))[:, 0].clamp_max(probs.shape[-1] - 1)
        next_token = torch.where(finished, torch.full_like(next_token, eos_id), next_token)
        tokens = torch.cat([tokens, next_token[:, None]], 1)
        finished = finished | (next_token == eos_id)
        if bool(finished.all()):
            break
    return tokens
''',
    },
    {
        "name": "beam_with_heapq",
        "function": "beam_search",
        "source": '''
def beam_search(model, src, max_len, bos_id, eos_id, beam_size):
    import heapq
    results = []
    for b in range(src.shape[0]):
        beam = [(0.0, [bos_id])]
        for _ in range(max_len):
            if all(seq[-1] == eos_id for _, seq in beam):
                break
            pool = []
            for score, seq in beam:
                if seq[-1] == eos_id:
                    pool.append((score, seq))
                    continue
                logp = F.log_softmax(model(src[b:b + 1], torch.tensor([seq]))[0, -1].double(), -1)
                values, indices = logp.topk(min(beam_size, logp.numel()))
                pool += [(score + float(v), seq + [int(i)]) for v, i in zip(values, indices)]
            beam = heapq.nlargest(beam_size, pool, key=lambda c: c[0])
        results.append(max(beam, key=lambda c: c[0])[1])
    width = max(map(len, results))
    return torch.tensor([r + [eos_id] * (width - len(r)) for r in results])
''',
    },
    {
        "name": "model_built_in_another_order",  # the hidden tests set weights by name, never by creation order
        "edits": [
            ("EncoderLayer", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.norm2, self.norm1 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.linear2, self.linear1 = nn.Linear(d_ff, d_model), nn.Linear(d_model, d_ff)
        self.self_attn = MultiHeadAttention(d_model, num_heads)

    def forward(self, x, mask=None):
        attended, _ = self.self_attn(x, x, x, mask=mask)
        x = self.norm1(x + self.dropout(attended))
        hidden = self.dropout(torch.relu(self.linear1(x)))
        return self.norm2(x + self.dropout(self.linear2(hidden)))
'''),
            ("DecoderLayer", '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.cross_weights = None
        self.norm3, self.norm2, self.norm1 = (nn.LayerNorm(d_model) for _ in range(3))
        self.linear2, self.linear1 = nn.Linear(d_ff, d_model), nn.Linear(d_model, d_ff)
        self.cross_attn, self.self_attn = MultiHeadAttention(d_model, num_heads), MultiHeadAttention(d_model, num_heads)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, self_mask=None, cross_mask=None, cache=None):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask=self_mask, cache=cache)[0]))
        attended, weights = self.cross_attn(x, memory, memory, mask=cross_mask)
        self.cross_weights = weights.detach()
        x = self.norm2(x + self.dropout(attended))
        return self.norm3(x + self.dropout(self.linear2(self.dropout(F.relu(self.linear1(x))))))
'''),
            ("Summarizer", '''
class Summarizer(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, pad_id, dropout=0.1):
        super().__init__()
        self.pad_id, self.d_model = pad_id, d_model
        self.out = nn.Linear(d_model, vocab_size)
        self.decoder = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.encoder = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers))
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("positions", sinusoidal_positional_encoding(max_len, d_model), persistent=False)

    def embed_tokens(self, tokens, start=0):
        positions = self.positions[start: start + tokens.shape[1]].unsqueeze(0)
        return self.dropout(self.embed(tokens) * self.d_model ** 0.5 + positions)

    def encode(self, src):
        real = padding_mask(src, self.pad_id)
        x = self.embed_tokens(src)
        for layer in self.encoder:
            x = layer(x, real.unsqueeze(1).repeat(1, src.shape[1], 1))
        return x

    def decode(self, memory, src, tgt_in, caches=None):
        if caches is not None:  # given
            if len(caches) == len(self.decoder):
                caches.append({})
            so_far = caches[-1].get("tokens", tgt_in[:, :0])
            start = so_far.shape[1]
            caches[-1]["tokens"] = torch.cat([so_far, tgt_in], dim=1)
            self_mask = decoder_self_attention_mask(caches[-1]["tokens"], self.pad_id)[:, start:]
        else:
            start = 0
            self_mask = decoder_self_attention_mask(tgt_in, self.pad_id)
        x = self.embed_tokens(tgt_in, start)
        cross_mask = cross_attention_mask(src, tgt_in, self.pad_id)
        for layer, cache in zip(self.decoder, caches if caches is not None else [None] * len(self.decoder)):
            x = layer(x, memory, self_mask, cross_mask, cache)
        return self.out(x)

    def forward(self, src, tgt_in):
        memory = self.encode(src)
        return self.decode(memory, src, tgt_in)
'''),
        ],
    },
    {
        "name": "sampling_row_by_row_in_float32",  # more model calls, the generator used in another order
        "function": "sample_decode",
        "source": '''
def sample_decode(model, src, max_len, bos_id, eos_id, temperature=1.0, top_k=None, top_p=None, generator=None):
    rows = []
    for b in range(src.shape[0]):
        tokens = [bos_id]
        while len(tokens) <= max_len and not (len(tokens) > 1 and tokens[-1] == eos_id):
            logits = model(src[b:b + 1], torch.tensor([tokens]))[0, -1].float() / temperature
            if top_k is not None:
                values, indices = logits.sort(descending=True)
                logits = torch.full_like(logits, float("-inf")).scatter(0, indices[:top_k], values[:top_k])
            if top_p is not None:
                ranked, order = logits.softmax(-1).sort(descending=True)
                logits[order[(ranked.cumsum(0) - ranked) >= top_p]] = float("-inf")
            tokens.append(int(torch.multinomial(logits.softmax(-1), 1, generator=generator)))
        rows.append(tokens)
    width = max(map(len, rows))
    return torch.tensor([row + [eos_id] * (width - len(row)) for row in rows])
''',
    },
    {
        "name": "cached_decoding_in_eval_mode_and_back",  # train/eval mode inside a decoder is the student's choice
        "function": "greedy_decode_cached",
        "source": '''
def greedy_decode_cached(model, src, max_len, bos_id, eos_id):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            memory = model.encode(src)
            caches = [dict() for _ in range(len(model.decoder))]
            tokens = torch.full((src.shape[0], 1), bos_id, dtype=torch.long)
            done = torch.zeros(src.shape[0], dtype=torch.bool)
            while tokens.shape[1] <= max_len and not done.all():
                step = model.decode(memory, src, tokens[:, -1:], caches)[:, -1].argmax(-1)
                step = torch.where(done, torch.full_like(step, eos_id), step)
                done = done | (step == eos_id)
                tokens = torch.cat([tokens, step[:, None]], 1)
    finally:
        model.train(was_training)
    return tokens
''',
    },
]


# ---------------------------------------------------------------- Part 12 (optional, not graded)
# performer_attention has a public check and no points: these are run against that check in
# process by test_summarization_performer.py, never graded (a bug there costs nothing).
def _reference(name: str) -> str:
    """The master's solution of ``name``, as one top-level definition without the TODO markers."""
    cell = next(c.source for c in master("summarization").cells if c.cell_type == "code" and f"def {name}(" in c.source)
    return "\n".join(line for line in cell.splitlines() if line.strip() not in ("# BEGIN SOLUTION", "# END SOLUTION")
                     and not line.strip().startswith("# TODO"))


_PERFORMER = _reference("performer_attention")


def _performer(name: str, *edits: tuple[str, str]) -> dict:
    source = _PERFORMER
    for old, new in edits:
        if old not in source:
            raise ValueError(f"{name}: {old!r} is not in the reference")
        source = source.replace(old, new)
    return {"name": name, "function": "performer_attention", "source": source}


PERFORMER_WRONG = [
    _performer("performer_without_the_d_quarter_scale", ("q, k = q / d ** 0.25, k / d ** 0.25", "pass  # BUG: no scale")),
    _performer("performer_without_the_key_norm_term", (" - (k * k).sum(-1, keepdim=True) / 2", "")),
    _performer("performer_without_either_norm_term", (" - (q * q).sum(-1, keepdim=True) / 2", ""),
               (" - (k * k).sum(-1, keepdim=True) / 2", "")),
    _performer("performer_stabilized_per_key", ("k_logits.amax((-2, -1), keepdim=True)", "k_logits.amax(-1, keepdim=True)")),
    _performer("performer_ignoring_padding_keys", ("    if key_mask is not None:\n        k_logits", "    if False:\n        k_logits"),
               ("(1.0 if key_mask is None else key_mask[..., None])", "1.0")),
    _performer("performer_ignoring_causal", ("    if causal:  # running sums", "    if False:  # BUG")),
    _performer("performer_unnormalized", ("return (numerator / denominator).to(dtype)", "return numerator.to(dtype)")),
    _performer("performer_causal_without_the_current_key",
               ('kv = torch.einsum("...tm,...td->...tmd", phi_k, v).cumsum(-3)',
                'kv = torch.einsum("...tm,...td->...tmd", phi_k, v).cumsum(-3) - torch.einsum("...tm,...td->...tmd", phi_k, v)'),
               ("(phi_q * phi_k.cumsum(-2))", "(phi_q * (phi_k.cumsum(-2) - phi_k))")),
    _performer("performer_causal_through_a_full_matrix",  # right numbers, quadratic memory
               ('        kv = torch.einsum("...tm,...td->...tmd", phi_k, v).cumsum(-3)  # (..., T, m, dv)\n'
                '        numerator = torch.einsum("...tm,...tmd->...td", phi_q, kv)\n'
                '        denominator = (phi_q * phi_k.cumsum(-2)).sum(-1, keepdim=True)',
                '        weights = (phi_q @ phi_k.transpose(-2, -1)).tril()  # BUG: (T, T)\n'
                '        numerator, denominator = weights @ v, weights.sum(-1, keepdim=True)')),
    _performer("performer_causal_with_a_floor_in_float32",  # later keys leak into earlier outputs
               ("q, k, v, projection = q.double(), k.double(), v.double(), projection.double()", "pass"),
               ("phi_k = torch.exp(k_logits - k_logits.amax((-2, -1), keepdim=True).detach())",
                "phi_k = torch.exp(k_logits - k_logits.amax((-2, -1), keepdim=True).detach()) + 1e-6")),
]
for _variant in PERFORMER_WRONG:
    _variant["must_fail_public"] = ["test_performer_public"]

PERFORMER_CORRECT = [
    _performer("performer_in_float64_throughout", ("    if causal:  # float64", "    if True:  # float64")),
    _performer("performer_without_stabilizers",
               ("q_logits - q_logits.amax(-1, keepdim=True).detach()", "q_logits"),
               ("k_logits - k_logits.amax((-2, -1), keepdim=True).detach()", "k_logits")),
    {"name": "performer_causal_as_a_loop_of_running_sums", "function": "performer_attention", "source": """
def performer_attention(q, k, v, projection, key_mask=None, causal=False):
    dtype, scale = q.dtype, q.shape[-1] ** -0.25
    if causal:
        q, k, v, projection = (x.to(torch.float64) for x in (q, k, v, projection))

    def features(x, over):
        logits = torch.einsum("...td,md->...tm", x * scale, projection) - (x * scale).pow(2).sum(-1, keepdim=True) / 2
        return (logits - logits.amax(dim=over, keepdim=True)).exp()

    phi_q, phi_k = features(q, -1), features(k, (-2, -1))
    if key_mask is not None:
        phi_k = phi_k * key_mask[..., None]
    if not causal:
        phi_k = phi_k + 1e-6 * (1.0 if key_mask is None else key_mask[..., None])
        return torch.einsum("...tm,...md->...td", phi_q, torch.einsum("...tm,...td->...md", phi_k, v)) / \\
            torch.einsum("...tm,...m->...t", phi_q, phi_k.sum(-2))[..., None]
    state = torch.zeros(*phi_k.shape[:-2], phi_k.shape[-1], v.shape[-1], dtype=v.dtype)
    norm = torch.zeros(*phi_k.shape[:-2], phi_k.shape[-1], dtype=v.dtype)
    rows = []
    for t in range(q.shape[-2]):
        state = state + phi_k[..., t, :, None] * v[..., t, None, :]
        norm = norm + phi_k[..., t, :]
        rows.append((phi_q[..., t, :, None] * state).sum(-2) / (phi_q[..., t, :] * norm).sum(-1, keepdim=True))
    return torch.stack(rows, dim=-2).to(dtype)
"""},
]


#: Implements nothing: every graded module has the submodules the text names (so weights can be set
#: and copied) and returns zeros of the right shape; the decoders return bos and zeros, and keep a
#: cache that grows.
IMPLEMENTS_NOTHING = """
import torch, torch.nn as nn
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model) for _ in range(4))
    def forward(self, query, key, value, mask=None, cache=None):
        B, Tq, d = query.shape
        if cache is not None:
            new = torch.zeros(B, self.num_heads, key.shape[1], d // self.num_heads)
            cache["k"] = torch.cat([cache["k"], new], 2) if "k" in cache else new
        Tk = cache["k"].shape[2] if cache is not None else key.shape[1]
        return torch.zeros(B, Tq, d), torch.zeros(B, self.num_heads, Tq, Tk)
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.norm1, self.norm2, self.dropout = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.Dropout(dropout)
    def forward(self, x, mask=None):
        return torch.zeros_like(x)
class DecoderLayer(EncoderLayer):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__(d_model, num_heads, d_ff, dropout)
        self.cross_attn, self.norm3 = MultiHeadAttention(d_model, num_heads), nn.LayerNorm(d_model)
    def forward(self, x, memory, self_mask=None, cross_mask=None, cache=None):
        self.cross_weights = torch.zeros(x.shape[0], self.cross_attn.num_heads, x.shape[1], memory.shape[1])
        return torch.zeros_like(x)
class Summarizer(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, max_len, pad_id, dropout=0.1):
        super().__init__()
        self.embed, self.out, self.d_model = nn.Embedding(vocab_size, d_model), nn.Linear(d_model, vocab_size), d_model
        self.encoder = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff) for _ in range(num_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff) for _ in range(num_layers))
    def embed_tokens(self, tokens, start=0):
        return torch.zeros(*tokens.shape, self.d_model)
    def encode(self, src):
        return torch.zeros(*src.shape, self.d_model)
    def decode(self, memory, src, tgt_in, caches=None):
        return torch.zeros(*tgt_in.shape, self.out.out_features)
    def forward(self, src, tgt_in):
        return self.decode(None, src, tgt_in)
def _tokens(src, max_len, bos_id, *args, **kwargs):
    return torch.cat([torch.full((len(src), 1), bos_id), torch.zeros(len(src), max_len, dtype=torch.long)], 1)
greedy_decode = sample_decode = beam_search = greedy_decode_cached = lambda model, src, max_len, bos_id, *a, **k: \
    _tokens(src, max_len, bos_id)
_forged = {name: globals()[name] for name in ("MultiHeadAttention", "EncoderLayer", "DecoderLayer", "Summarizer",
           "greedy_decode", "sample_decode", "beam_search", "greedy_decode_cached")}
"""

#: The hidden tests that rest on properties of two runs alone, passed by
#: ``adversarial.forges_the_collected_values`` (two equal outputs, or two different ones) and by
#: simple functions that are not the graded ones: attention that averages the values it may see (a
#: running mean with the cache), a model whose logits add the mean of the article's embeddings to
#: each summary token's, a sampler that draws any tokens from its generator.
FORGEABLE_PROPERTIES = {"test_multihead_hidden_cache", "test_model_hidden_cache", "test_sampling_hidden_generator"}


# A notebook of this assignment takes about 20 s to grade: known-wrong variants share notebooks
# where no test one must fail reaches a function another replaces (``pack_wrong``); a variant with
# ``must_keep`` is graded alone. Correct alternatives are packed together.
pack_wrong(WRONG, master("summarization"), size=7)
pack_correct(CORRECT)
