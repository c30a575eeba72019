"""Known-wrong and known-correct implementations for the ``attention_foundations`` assignment.

Pure data, no tests; the same contract as ``kernel_attention_variants``:

* every ``WRONG`` entry must fail each hidden test named in ``must_lose``, and each public check
  named in ``must_fail_public`` (so the student sees the bug before submitting);
* every ``CORRECT`` entry must pass every hidden test and every public check.

Sources may use what the notebook's setup cell imports (``math``, ``torch``, ``nn``) and the other
functions and classes the students write.
"""

from tests.support.notebook_edits import master, pack_correct, pack_wrong

_DECODER_HEAD = '''
class AttentionDecoder(nn.Module):
    def __init__(self, vocab_size, hidden_size, embed_size=32):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=0)
        self.rnn = nn.GRU(embed_size, hidden_size, batch_first=True)
        self.combine = nn.Linear(2 * hidden_size, hidden_size)
        self.out = nn.Linear(hidden_size, vocab_size)

    def forward(self, tokens, hidden, enc_states, src_mask):
        queries, hidden = self.rnn(self.embed(tokens), hidden)
'''


def _decoder(body: str) -> str:
    """An AttentionDecoder whose forward continues with ``body`` (indented 8 spaces)."""
    return _DECODER_HEAD + "\n".join("        " + line for line in body.strip("\n").splitlines()) + "\n"


WRONG = [
    # ------------------------------------------------------------------ Part 1
    {
        "name": "scores_without_transposing_the_projections",
        "function": "attention_scores",
        "source": '''
def attention_scores(h, W_q, W_k):
    return (h @ W_q) @ (h @ W_k).T  # BUG: h @ W is W^T h_i, not W h_i
''',
        "must_lose": ["test_qkv_hidden_scores", "test_qkv_hidden_argmax"],
        "must_fail_public": ["test_qkv_public"],
    },
    {
        "name": "scores_keys_as_rows",
        "function": "attention_scores",
        "source": '''
def attention_scores(h, W_q, W_k):
    return (h @ W_k.T) @ (h @ W_q.T).T  # BUG: entry (i, j) is k_i . q_j
''',
        "must_lose": ["test_qkv_hidden_scores", "test_qkv_hidden_argmax"],
        "must_fail_public": ["test_qkv_public"],
    },
    {
        "name": "argmax_over_the_queries",
        "function": "argmax_attention",
        "source": '''
def argmax_attention(h, W_q, W_k, W_v):
    best = attention_scores(h, W_q, W_k).argmax(dim=0)  # BUG: the best query of each key
    return (h @ W_v.T)[best]
''',
        "must_lose": ["test_qkv_hidden_argmax"],
        "must_fail_public": ["test_qkv_public"],
    },
    {
        "name": "argmax_returns_the_hidden_state",
        "function": "argmax_attention",
        "source": '''
def argmax_attention(h, W_q, W_k, W_v):
    return h[attention_scores(h, W_q, W_k).argmax(dim=-1)]  # BUG: h_j instead of v_j = W_v h_j
''',
        "must_lose": ["test_qkv_hidden_argmax"],
        "must_fail_public": ["test_qkv_public"],
    },
    {
        "name": "argmax_as_a_softmax_mixture",
        "function": "argmax_attention",
        "source": '''
def argmax_attention(h, W_q, W_k, W_v):
    weights = torch.softmax(attention_scores(h, W_q, W_k), dim=-1)  # BUG: a mixture, not one value
    return weights @ (h @ W_v.T)
''',
        "must_lose": ["test_qkv_hidden_argmax"],
        "must_fail_public": ["test_qkv_public"],
    },
    {
        "name": "argmax_ties_to_the_largest_index",
        "function": "argmax_attention",
        "source": '''
def argmax_attention(h, W_q, W_k, W_v):
    scores = attention_scores(h, W_q, W_k)
    best = scores.shape[-1] - 1 - scores.flip(-1).argmax(dim=-1)  # BUG: the last of the tied keys
    return (h @ W_v.T)[best]
''',
        "must_lose": ["test_qkv_hidden_argmax"],
        "must_fail_public": ["test_qkv_public"],
    },
    {
        "name": "argmax_sums_the_tied_values",
        "function": "argmax_attention",
        "source": '''
def argmax_attention(h, W_q, W_k, W_v):
    scores = attention_scores(h, W_q, W_k)
    weights = (scores == scores.max(dim=-1, keepdim=True).values).to(h.dtype)  # BUG: every tied key gets 1
    return weights @ (h @ W_v.T)
''',
        "must_lose": ["test_qkv_hidden_argmax"],
        "must_fail_public": ["test_qkv_public"],
    },
    # ------------------------------------------------------------------ Part 2
    {
        "name": "moments_with_q_equal_to_k",
        "function": "dot_product_moments",
        "source": '''
def dot_product_moments(d, mu, sigma, num_samples, generator):
    q = mu + sigma * torch.randn(num_samples, d, generator=generator, dtype=torch.float64)
    dots = (q * q).sum(dim=-1)  # BUG: one vector, not an independent pair
    return dots.mean().item(), dots.var().item()
''',
        "must_lose": ["test_moments_hidden_simulation"],
        "must_fail_public": ["test_moments_public"],
    },
    {
        "name": "moments_sigma_as_variance",
        "function": "dot_product_moments",
        "source": '''
def dot_product_moments(d, mu, sigma, num_samples, generator):
    q = mu + sigma ** 2 * torch.randn(num_samples, d, generator=generator, dtype=torch.float64)  # BUG
    k = mu + sigma ** 2 * torch.randn(num_samples, d, generator=generator, dtype=torch.float64)
    dots = (q * k).sum(dim=-1)
    return dots.mean().item(), dots.var().item()
''',
        "must_lose": ["test_moments_hidden_simulation"],
        "must_fail_public": ["test_moments_public"],
    },
    {
        "name": "moments_standard_deviation",
        "function": "dot_product_moments",
        "source": '''
def dot_product_moments(d, mu, sigma, num_samples, generator):
    q = mu + sigma * torch.randn(num_samples, d, generator=generator, dtype=torch.float64)
    k = mu + sigma * torch.randn(num_samples, d, generator=generator, dtype=torch.float64)
    dots = (q * k).sum(dim=-1)
    return dots.mean().item(), dots.std().item()  # BUG: the standard deviation
''',
        "must_lose": ["test_moments_hidden_simulation"],
        "must_fail_public": ["test_moments_public"],
    },
    {
        "name": "moments_ignore_the_generator",
        "function": "dot_product_moments",
        "source": '''
def dot_product_moments(d, mu, sigma, num_samples, generator):
    q = mu + sigma * torch.randn(num_samples, d, dtype=torch.float64)  # BUG: the global generator
    k = mu + sigma * torch.randn(num_samples, d, dtype=torch.float64)
    dots = (q * k).sum(dim=-1)
    return dots.mean().item(), dots.var().item()
''',
        "must_lose": ["test_moments_hidden_simulation"],
        "must_fail_public": ["test_moments_public"],
    },
    {
        "name": "moments_closed_forms_without_simulating",
        "function": "dot_product_moments",
        "source": '''
def dot_product_moments(d, mu, sigma, num_samples, generator):
    return float(d * mu ** 2), float(d * (sigma ** 4 + 2 * mu ** 2 * sigma ** 2))  # BUG: no simulation
''',
        "must_lose": ["test_moments_hidden_simulation"],
        "must_fail_public": ["test_moments_public"],
    },
    {
        "name": "moments_drawn_in_float32",
        "function": "dot_product_moments",
        "source": '''
def dot_product_moments(d, mu, sigma, num_samples, generator):
    q = mu + sigma * torch.randn(num_samples, d, generator=generator)  # BUG: float32, not float64
    k = mu + sigma * torch.randn(num_samples, d, generator=generator)
    dots = (q * k).sum(dim=-1)
    return dots.mean().item(), dots.var().item()
''',
        "must_lose": ["test_moments_hidden_simulation"],
        "must_fail_public": ["test_moments_public"],
    },
    {
        "name": "moments_as_tensors",
        "function": "dot_product_moments",
        "source": '''
def dot_product_moments(d, mu, sigma, num_samples, generator):
    q = mu + sigma * torch.randn(num_samples, d, generator=generator, dtype=torch.float64)
    k = mu + sigma * torch.randn(num_samples, d, generator=generator, dtype=torch.float64)
    dots = (q * k).sum(dim=-1)
    return dots.mean(), dots.var()  # BUG: tensors, not Python floats
''',
        "must_lose": ["test_moments_hidden_simulation"],
        "must_fail_public": ["test_moments_public"],
    },
    {
        "name": "variance_missing_the_factor_two",
        "function": "dot_product_variance",
        "source": '''
def dot_product_variance(d, mu, sigma):
    return d * (sigma ** 4 + mu ** 2 * sigma ** 2)  # BUG: the cross term counted once
''',
        "must_lose": ["test_moments_hidden_closed_forms"],
        "must_fail_public": ["test_closed_forms_public"],
    },
    {
        "name": "mean_not_squared",
        "function": "dot_product_mean",
        "source": '''
def dot_product_mean(d, mu, sigma):
    return d * mu  # BUG: E[q_i k_i] = mu^2
''',
        "must_lose": ["test_moments_hidden_closed_forms"],
        "must_fail_public": ["test_closed_forms_public"],
    },
    {
        "name": "scale_d_not_sqrt_d",
        "function": "scale_for_unit_variance",
        "source": '''
def scale_for_unit_variance(d):
    return d  # BUG: Var(X / s) = Var(X) / s^2
''',
        "must_lose": ["test_moments_hidden_scale"],
        "must_fail_public": ["test_closed_forms_public"],
    },
    # ------------------------------------------------------------------ Part 3
    {
        "name": "decoder_unscaled_scores",
        "function": "AttentionDecoder",
        "source": _decoder('''
scores = queries @ enc_states.transpose(1, 2)  # BUG: no 1 / sqrt(H)
scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
weights = torch.softmax(scores, dim=-1)
context = weights @ enc_states
logits = self.out(torch.tanh(self.combine(torch.cat([queries, context], dim=-1))))
return logits, hidden, weights
'''),
        "must_lose": ["test_decoder_hidden_values"],
        "must_fail_public": ["test_decoder_public_shapes_and_mask"],
    },
    {
        "name": "decoder_ignores_padding",
        "function": "AttentionDecoder",
        "source": _decoder('''
scores = queries @ enc_states.transpose(1, 2) / math.sqrt(queries.shape[-1])  # BUG: no mask
weights = torch.softmax(scores, dim=-1)
context = weights @ enc_states
logits = self.out(torch.tanh(self.combine(torch.cat([queries, context], dim=-1))))
return logits, hidden, weights
'''),
        "must_lose": ["test_decoder_hidden_values"],
        "must_fail_public": ["test_decoder_public_shapes_and_mask"],
    },
    {
        "name": "decoder_mask_inverted",
        "function": "AttentionDecoder",
        "source": _decoder('''
scores = queries @ enc_states.transpose(1, 2) / math.sqrt(queries.shape[-1])
scores = scores.masked_fill(src_mask[:, None, :], -1e9)  # BUG: hides the real tokens
weights = torch.softmax(scores, dim=-1)
context = weights @ enc_states
logits = self.out(torch.tanh(self.combine(torch.cat([queries, context], dim=-1))))
return logits, hidden, weights
'''),
        "must_lose": ["test_decoder_hidden_values"],
        "must_fail_public": ["test_decoder_public_shapes_and_mask"],
    },
    {
        "name": "decoder_softmax_over_output_steps",
        "function": "AttentionDecoder",
        "source": _decoder('''
scores = queries @ enc_states.transpose(1, 2) / math.sqrt(queries.shape[-1])
scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
weights = torch.softmax(scores, dim=1)  # BUG: normalises over the output steps
weights = torch.nan_to_num(weights)
context = weights @ enc_states
logits = self.out(torch.tanh(self.combine(torch.cat([queries, context], dim=-1))))
return logits, hidden, weights
'''),
        "must_lose": ["test_decoder_hidden_values"],
        "must_fail_public": ["test_decoder_public_shapes_and_mask"],
    },
    {
        "name": "decoder_context_before_query",
        "function": "AttentionDecoder",
        "source": _decoder('''
scores = queries @ enc_states.transpose(1, 2) / math.sqrt(queries.shape[-1])
scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
weights = torch.softmax(scores, dim=-1)
context = weights @ enc_states
logits = self.out(torch.tanh(self.combine(torch.cat([context, queries], dim=-1))))  # BUG: order
return logits, hidden, weights
'''),
        "must_lose": ["test_decoder_hidden_values"],
        "must_fail_public": ["test_decoder_public_logits_and_steps"],
    },
    {
        "name": "decoder_queries_from_the_initial_state",
        "function": "AttentionDecoder",
        "source": _decoder('''
q = queries[:, :1].expand_as(queries)  # BUG: every step asks with the first step's query
scores = q @ enc_states.transpose(1, 2) / math.sqrt(queries.shape[-1])
scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
weights = torch.softmax(scores, dim=-1)
context = weights @ enc_states
logits = self.out(torch.tanh(self.combine(torch.cat([queries, context], dim=-1))))
return logits, hidden, weights
'''),
        "must_lose": ["test_decoder_hidden_values"],
        "must_fail_public": ["test_decoder_public_shapes_and_mask"],
    },
    # ------------------------------------------------------------------ Part 4
    {
        "name": "sinusoidal_sines_then_cosines",
        "function": "sinusoidal_encoding",
        "source": '''
def sinusoidal_encoding(T, d):
    if d % 2:
        raise ValueError("d must be even")
    t = torch.arange(T, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    return torch.cat([torch.sin(t * omega), torch.cos(t * omega)], dim=-1).float()  # BUG: halves, not pairs
''',
        "must_lose": ["test_encodings_hidden_sinusoidal"],
        "must_fail_public": ["test_encodings_public"],
    },
    {
        "name": "sinusoidal_exponent_i_over_d",
        "function": "sinusoidal_encoding",
        "source": '''
def sinusoidal_encoding(T, d):
    if d % 2:
        raise ValueError("d must be even")
    t = torch.arange(T, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / d)  # BUG: i / d, not 2i / d
    pe = torch.zeros(T, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(t * omega), torch.cos(t * omega)
    return pe.float()
''',
        "must_lose": ["test_encodings_hidden_sinusoidal"],
        "must_fail_public": ["test_encodings_public"],
    },
    {
        "name": "sinusoidal_positions_from_one",
        "function": "sinusoidal_encoding",
        "source": '''
def sinusoidal_encoding(T, d):
    if d % 2:
        raise ValueError("d must be even")
    t = torch.arange(1, T + 1, dtype=torch.float64)[:, None]  # BUG: positions 1, ..., T
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(T, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(t * omega), torch.cos(t * omega)
    return pe.float()
''',
        "must_lose": ["test_encodings_hidden_sinusoidal"],
        "must_fail_public": ["test_encodings_public"],
    },
    {
        "name": "sinusoidal_left_in_float64",
        "function": "sinusoidal_encoding",
        "source": '''
def sinusoidal_encoding(T, d):
    t = torch.arange(T, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(T, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(t * omega), torch.cos(t * omega)
    return pe  # BUG: float64, where the text asks for float32
''',
        "must_lose": ["test_encodings_hidden_sinusoidal"],
        "must_fail_public": ["test_encodings_public"],
    },
    {
        "name": "one_hot_reversed",
        "function": "one_hot_encoding",
        "source": '''
def one_hot_encoding(T):
    return torch.eye(T).flip(0)  # BUG: row t is e_(T-1-t)
''',
        "must_lose": ["test_encodings_hidden_one_hot"],
        "must_fail_public": ["test_encodings_public"],
    },
    {
        "name": "concat_scores_forget_positions",
        "function": "add_and_concat_scores",
        "source": '''
def add_and_concat_scores(x, p):
    z = x + p
    return z @ z.T, x @ x.T  # BUG: [x; p] . [x; p] also has p . p
''',
        "must_lose": ["test_add_concat_hidden"],
        "must_fail_public": ["test_add_concat_public"],
    },
    {
        # issue 46: right scores, but the caller's x is changed in place
        "name": "add_concat_changes_x_in_place",
        "function": "add_and_concat_scores",
        "source": '''
def add_and_concat_scores(x, p):
    concatenated = torch.cat([x, p], dim=-1)
    concatenated = concatenated @ concatenated.T
    x += p  # BUG: the caller's x now holds x + p
    return x @ x.T, concatenated
''',
        "must_lose": ["test_add_concat_hidden"],
        "must_fail_public": ["test_add_concat_public"],
    },
    {
        "name": "relative_bias_offset_j_minus_i",
        "function": "relative_position_bias",
        "source": '''
def relative_position_bias(table, T):
    positions = torch.arange(T)
    offsets = positions[None, :] - positions[:, None] + T - 1  # BUG: j - i
    return table[offsets].permute(2, 0, 1)
''',
        "must_lose": ["test_relative_hidden_bias"],
        "must_fail_public": ["test_relative_public"],
    },
    {
        "name": "relative_count_two_t_per_head",
        "function": "relative_bias_parameter_count",
        "source": '''
def relative_bias_parameter_count(T, heads):
    return 2 * T * heads  # BUG: there are 2T - 1 offsets
''',
        "must_lose": ["test_relative_hidden_count"],
        "must_fail_public": ["test_relative_public"],
    },
    {
        "name": "relative_count_as_a_numpy_int",
        "function": "relative_bias_parameter_count",
        "source": '''
def relative_bias_parameter_count(T, heads):
    import numpy as np
    return np.int64(2 * T - 1) * heads  # BUG: a NumPy integer, not a Python int
''',
        "must_lose": ["test_relative_hidden_count"],
        "must_fail_public": ["test_relative_public"],
    },
    {
        "name": "receptive_field_as_int32",
        "function": "receptive_field",
        "source": '''
def receptive_field(sources):
    T = sources[0].shape[-1]
    reach = torch.eye(T, dtype=torch.bool)
    for layer in sources:
        new = reach.clone()
        for head in layer:
            new |= reach[head]
        reach = new
    return reach.sum(dim=1).to(torch.int32)  # BUG: int32, not int64
''',
        "must_lose": ["test_receptive_hidden"],
        "must_fail_public": ["test_receptive_public"],
    },
    {
        "name": "receptive_field_updated_in_place",
        "function": "receptive_field",
        "source": '''
def receptive_field(sources):
    T = sources[0].shape[-1]
    reach = torch.eye(T, dtype=torch.bool)
    for layer in sources:
        for head in layer:
            for i in range(T):
                reach[i] |= reach[head[i]]  # BUG: later positions see this layer's updates
    return reach.sum(dim=1)
''',
        "must_lose": ["test_receptive_hidden"],
        "must_fail_public": ["test_receptive_public"],
    },
    {
        "name": "receptive_field_without_residual",
        "function": "receptive_field",
        "source": '''
def receptive_field(sources):
    T = sources[0].shape[-1]
    reach = torch.eye(T, dtype=torch.bool)
    for layer in sources:
        new = torch.zeros_like(reach)  # BUG: forgets what the position itself saw
        for head in layer:
            new |= reach[head]
        reach = new
    return reach.sum(dim=1)
''',
        "must_lose": ["test_receptive_hidden"],
        "must_fail_public": ["test_receptive_public"],
    },
    {
        "name": "receptive_field_counts_paths",
        "function": "receptive_field",
        "source": '''
def receptive_field(sources):
    T = sources[0].shape[-1]
    return torch.full((T,), (sources[0].shape[0] + 1) ** len(sources), dtype=torch.long)  # BUG: the bound
''',
        "must_lose": ["test_receptive_hidden"],
        "must_fail_public": ["test_receptive_public"],
    },
    {
        "name": "receptive_field_last_layer_first",
        "function": "receptive_field",
        "source": '''
def receptive_field(sources):
    T = sources[0].shape[-1]
    reach = torch.eye(T, dtype=torch.bool)
    for layer in reversed(sources):  # BUG: layer order reversed
        new = reach.clone()
        for head in layer:
            new |= reach[head]
        reach = new
    return reach.sum(dim=1)
''',
        "must_lose": ["test_receptive_hidden"],
        "must_fail_public": ["test_receptive_public"],
    },
    # ------------------------------------------------------------------ Part 5
    {
        "name": "copy_query_divides_by_the_length",
        "function": "copy_query",
        "source": '''
def copy_query(keys, j, beta):
    return beta * keys[j] / keys[j].norm()  # BUG: the score is then beta |k_j|
''',
        "must_lose": ["test_queries_hidden_copy"],
        "must_fail_public": ["test_queries_public"],
    },
    {
        "name": "average_query_halves_beta",
        "function": "average_query",
        "source": '''
def average_query(keys, a, b, beta):
    return 0.5 * beta * (keys[a] / keys[a].dot(keys[a]) + keys[b] / keys[b].dot(keys[b]))  # BUG: scores beta / 2
''',
        "must_lose": ["test_queries_hidden_average"],
        "must_fail_public": ["test_queries_public"],
    },
    # ------------------------------------------------------------------ right values, but an argument changed in place
    # (add_and_concat_scores has one already: add_concat_changes_x_in_place)
    {
        "name": "scores_transpose_w_k_in_place",
        "function": "attention_scores",
        "source": '''
def attention_scores(h, W_q, W_k):
    return (h @ W_q.T) @ (h @ W_k.t_()).T  # BUG: t_() transposes the caller's W_k in place (W_k.T would not)
''',
        "must_lose": ["test_qkv_hidden_scores"],
        "must_fail_public": ["test_qkv_public"],
    },
    {
        "name": "argmax_gathers_into_h",
        "function": "argmax_attention",
        "source": '''
def argmax_attention(h, W_q, W_k, W_v):
    best = attention_scores(h, W_q, W_k).argmax(dim=-1)
    h[:] = h[best]  # BUG: writes the chosen states into the caller's h (h = h[best] would not)
    return h @ W_v.T
''',
        "must_lose": ["test_qkv_hidden_argmax"],
        "must_fail_public": ["test_qkv_public"],
    },
    {
        "name": "decoder_zeroes_padding_states_in_place",
        "function": "AttentionDecoder",
        "source": _decoder('''
enc_states.masked_fill_(~src_mask[:, :, None], 0)  # BUG: zeroes the caller's padding states (weight 0 there anyway)
scores = queries @ enc_states.transpose(1, 2) / math.sqrt(queries.shape[-1])
scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
weights = torch.softmax(scores, dim=-1)
context = weights @ enc_states
logits = self.out(torch.tanh(self.combine(torch.cat([queries, context], dim=-1))))
return logits, hidden, weights
'''),
        "must_lose": ["test_decoder_hidden_values"],
        "must_fail_public": ["test_decoder_public_shapes_and_mask"],
    },
    {
        "name": "relative_bias_flips_the_table_in_place",
        "function": "relative_position_bias",
        "source": '''
def relative_position_bias(table, T):
    table[:] = table.flip(0)  # BUG: writes the flipped table into the caller's: row r now holds offset T - 1 - r
    positions = torch.arange(T)
    offsets = positions[None, :] - positions[:, None] + T - 1  # j - i indexes the flipped table
    return table[offsets].permute(2, 0, 1)
''',
        "must_lose": ["test_relative_hidden_bias"],
        "must_fail_public": ["test_relative_public"],
    },
    {
        "name": "receptive_field_appends_the_residual_to_the_callers_list",
        "function": "receptive_field",
        "source": '''
def receptive_field(sources):
    T = sources[0].shape[-1]
    reach = torch.eye(T, dtype=torch.bool)
    for l, layer in enumerate(sources):
        sources[l] = torch.cat([layer, torch.arange(T)[None]])  # BUG: the residual as a head, written into the caller's list
        new = torch.zeros_like(reach)
        for head in sources[l]:
            new |= reach[head]
        reach = new
    return reach.sum(dim=1)
''',
        "must_lose": ["test_receptive_hidden"],
        "must_fail_public": ["test_receptive_public"],
    },
    {
        "name": "copy_query_scales_a_view_of_keys",
        "function": "copy_query",
        "source": '''
def copy_query(keys, j, beta):
    q = keys[j]  # a view of row j of the caller's keys
    q *= beta / q.dot(q)  # BUG: *= scales the caller's key j
    return q
''',
        "must_lose": ["test_queries_hidden_copy"],
        "must_fail_public": ["test_queries_public"],
    },
    {
        "name": "average_query_normalises_views_of_keys",
        "function": "average_query",
        "source": '''
def average_query(keys, a, b, beta):
    first, second = keys[a], keys[b]  # views of the caller's keys
    first /= first.dot(first)  # BUG: /= divides the caller's keys a and b in place
    second /= second.dot(second)
    return beta * (first + second)
''',
        "must_lose": ["test_queries_hidden_average"],
        "must_fail_public": ["test_queries_public"],
    },
]

CORRECT = [
    {
        "name": "scores_with_einsum_on_columns",
        "function": "attention_scores",
        "source": '''
def attention_scores(h, W_q, W_k):
    Q = W_q @ h.T  # (d_k, T): column i is q_i
    K = W_k @ h.T
    return torch.einsum("ai,aj->ij", Q, K)
''',
    },
    {
        "name": "argmax_with_a_loop",
        "function": "argmax_attention",
        "source": '''
def argmax_attention(h, W_q, W_k, W_v):
    scores = attention_scores(h, W_q, W_k)
    rows = []
    for i in range(h.shape[0]):
        j = int(torch.argmax(scores[i]))
        rows.append(W_v @ h[j])
    return torch.stack(rows)
''',
    },
    {
        "name": "moments_one_draw_and_biased_variance",
        "function": "dot_product_moments",
        "source": '''
def dot_product_moments(d, mu, sigma, num_samples, generator):
    pairs = torch.normal(mu, sigma, size=(2, num_samples, d), generator=generator, dtype=torch.float64)
    dots = torch.einsum("nd,nd->n", pairs[0], pairs[1])
    return float(dots.mean()), float(dots.var(unbiased=False))
''',
    },
    {
        "name": "closed_forms_rearranged",
        "edits": [
            ("dot_product_mean", '''
def dot_product_mean(d, mu, sigma):
    return float(sum(mu * mu for _ in range(d)))
'''),
            ("dot_product_variance", '''
def dot_product_variance(d, mu, sigma):
    second_moment = sigma ** 2 + mu ** 2
    return d * (second_moment ** 2 - mu ** 4)
'''),
            ("scale_for_unit_variance", '''
def scale_for_unit_variance(d):
    return d ** 0.5
'''),
        ],
    },
    {
        "name": "decoder_with_einsum_and_renormalised_weights",
        "function": "AttentionDecoder",
        "source": _decoder('''
H = queries.shape[-1]
scores = torch.einsum("bth,bsh->bts", queries, enc_states) / H ** 0.5
weights = torch.softmax(scores, dim=-1) * src_mask[:, None, :]
weights = weights / weights.sum(dim=-1, keepdim=True)
context = torch.einsum("bts,bsh->bth", weights, enc_states)
combined = torch.tanh(self.combine(torch.cat((queries, context), dim=2)))
return self.out(combined), hidden, weights
'''),
    },
    {
        "name": "sinusoidal_with_a_loop_in_float32",
        "function": "sinusoidal_encoding",
        "source": '''
def sinusoidal_encoding(T, d):
    if d % 2:
        raise ValueError("d must be even")
    pe = torch.zeros(T, d)
    for t in range(T):
        for i in range(d // 2):
            angle = t / 10000 ** (2 * i / d)
            pe[t, 2 * i] = math.sin(angle)
            pe[t, 2 * i + 1] = math.cos(angle)
    return pe
''',
    },
    {
        "name": "add_concat_by_expanding",
        "function": "add_and_concat_scores",
        "source": '''
def add_and_concat_scores(x, p):
    words, positions = x @ x.T, p @ p.T
    cross = x @ p.T + p @ x.T
    return words + positions + cross, words + positions
''',
    },
    {
        "name": "relative_bias_with_loops",
        "edits": [
            ("relative_position_bias", '''
def relative_position_bias(table, T):
    heads = table.shape[1]
    bias = torch.empty(heads, T, T, dtype=table.dtype)
    for i in range(T):
        for j in range(T):
            bias[:, i, j] = table[i - j + T - 1]
    return bias
'''),
            ("relative_bias_parameter_count", '''
def relative_bias_parameter_count(T, heads):
    return 2 * T * heads - heads
'''),
        ],
    },
    {
        "name": "receptive_field_with_sets",
        "function": "receptive_field",
        "source": '''
def receptive_field(sources):
    T = sources[0].shape[-1]
    seen = [{i} for i in range(T)]
    for layer in sources:
        seen = [seen[i].union(*(seen[int(layer[h, i])] for h in range(layer.shape[0]))) for i in range(T)]
    return torch.tensor([len(s) for s in seen])
''',
    },
    {
        "name": "queries_by_least_squares",
        "edits": [
            ("copy_query", '''
def copy_query(keys, j, beta):
    target = torch.zeros(keys.shape[0], dtype=keys.dtype)
    target[j] = beta
    return torch.linalg.pinv(keys) @ target
'''),
            ("average_query", '''
def average_query(keys, a, b, beta):
    return copy_query(keys, a, beta) + copy_query(keys, b, beta)
'''),
        ],
    },
]


#: Implements nothing: the one function a property alone tests returns zeros (the others stay the
#: blank notebook's TODOs, which fail their golden tests).
IMPLEMENTS_NOTHING = """
def dot_product_moments(d, mu, sigma, num_samples, generator):
    return 0.0, 0.0
_forged = {"dot_product_moments": dot_product_moments}
"""

#: Rests on properties alone, passed by ``adversarial.forges_the_collected_values`` and by a function
#: that returns the closed forms (the text asks for them) plus a little float64 noise from the generator.
FORGEABLE_PROPERTIES = {"test_moments_hidden_simulation"}


# A notebook takes about 15 s to grade: known-wrong variants share notebooks where no test one must fail
# reaches a function another replaces (``pack_wrong``); correct alternatives are packed together.
pack_wrong(WRONG, master("attention_foundations"))
pack_correct(CORRECT)
