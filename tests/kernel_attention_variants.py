"""Known-wrong and known-correct implementations for the ``kernel_attention`` assignment.

Pure data, no tests. Each entry replaces the definition of ``function`` in the master notebook
(``solutions/kernel_attention/kernel_attention.ipynb``) with ``source``; the grading test then
grades the modified notebook against the golden values recorded from the reference:

* every ``WRONG`` entry must fail each hidden test named in ``must_lose`` (it may fail more), and
  each public check named in ``must_fail_public``: there a student sees the bug before submitting,
  in the question of the function that has it;
* every ``CORRECT`` entry must pass every hidden test (full marks) and every public check.

The sources may use what the notebook's setup cell imports (``math``, ``torch``, ``F``) and the
other functions the students write (``kernel_attention``, ``random_fourier_features``, ...).
"""

from tests.support.notebook_edits import master, pack_correct, pack_wrong

WRONG = [
    # ------------------------------------------------------------------ softmax_attention
    {
        "name": "softmax_over_query_axis",
        "function": "softmax_attention",
        "source": '''
def softmax_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)  # BUG: normalises over the queries
    return weights @ V, weights
''',
        "must_lose": ["test_softmax_hidden_plain", "test_softmax_hidden_masked", "test_softmax_hidden_stable"],
    },
    {
        "name": "softmax_missing_sqrt_d",
        "function": "softmax_attention",
        "source": '''
def softmax_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1)  # BUG: no 1 / sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights
''',
        "must_lose": ["test_softmax_hidden_plain", "test_softmax_hidden_masked"],
        "must_fail_public": ["test_softmax_scales_by_sqrt_d"],
    },
    {
        "name": "softmax_mask_polarity_flipped",
        "function": "softmax_attention",
        "source": '''
def softmax_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # BUG: blocks the allowed pairs
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights
''',
        "must_lose": ["test_softmax_hidden_masked"],
    },
    {
        "name": "softmax_mask_after_normalising",
        "function": "softmax_attention",
        "source": '''
def softmax_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask  # BUG: rows no longer sum to 1
    return weights @ V, weights
''',
        "must_lose": ["test_softmax_hidden_masked"],
    },
    {
        "name": "softmax_naive_exp_overflows",
        "function": "softmax_attention",
        "source": '''
def softmax_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    e = torch.exp(scores)  # BUG: no max subtraction, overflows for large scores
    if mask is not None:
        e = e * mask
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ V, weights
''',
        "must_lose": ["test_softmax_hidden_stable"],
    },
    # ------------------------------------------------------------------ quadratic kernel / feature map
    {
        "name": "quadratic_kernel_not_squared",
        "function": "quadratic_kernel",
        "source": '''
def quadratic_kernel(Q, K):
    return Q @ K.transpose(-2, -1)  # BUG: linear kernel
''',
        "must_lose": ["test_quadratic_kernel_hidden"],
    },
    {
        "name": "quadratic_kernel_elementwise",
        "function": "quadratic_kernel",
        "source": '''
def quadratic_kernel(Q, K):
    return Q.square() @ K.square().transpose(-2, -1)  # BUG: sum of squared products, not square of the sum
''',
        "must_lose": ["test_quadratic_kernel_hidden"],
    },
    {
        "name": "quadratic_feature_map_identity",
        "function": "quadratic_feature_map",
        "source": '''
def quadratic_feature_map(x):
    return x  # BUG: the linear kernel's feature map
''',
        "must_lose": ["test_quadratic_feature_map_hidden"],
    },
    {
        "name": "quadratic_feature_map_elementwise_square",
        "function": "quadratic_feature_map",
        "source": '''
def quadratic_feature_map(x):
    return x ** 2  # BUG: drops the cross terms x_a x_b, a != b
''',
        "must_lose": ["test_quadratic_feature_map_hidden"],
    },
    {
        "name": "quadratic_feature_map_symmetric_without_sqrt2",
        "function": "quadratic_feature_map",
        "source": '''
def quadratic_feature_map(x):
    D = x.shape[-1]
    a, b = torch.triu_indices(D, D)
    return x[..., a] * x[..., b]  # BUG: off-diagonal products need a factor sqrt(2)
''',
        "must_lose": ["test_quadratic_feature_map_hidden"],
    },
    # ------------------------------------------------------------------ kernel_attention
    {
        "name": "kernel_attention_without_normalizer",
        "function": "kernel_attention",
        "source": '''
def kernel_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q), feature_map(K)
    return phi_q @ (phi_k.transpose(-2, -1) @ V)  # BUG: numerator only
''',
        "must_lose": ["test_kernel_attention_hidden_self", "test_kernel_attention_hidden_cross"],
    },
    {
        "name": "kernel_attention_global_normalizer",
        "function": "kernel_attention",
        "source": '''
def kernel_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q), feature_map(K)
    numerator = phi_q @ (phi_k.transpose(-2, -1) @ V)
    total = (phi_q.sum(dim=-2) * phi_k.sum(dim=-2)).sum(dim=-1)  # BUG: one constant for all queries
    return numerator / total[..., None, None]
''',
        "must_lose": ["test_kernel_attention_hidden_self", "test_kernel_attention_hidden_cross"],
    },
    # ------------------------------------------------------------------ random Fourier features
    {
        "name": "rff_missing_sqrt_one_over_d_random",
        "function": "random_fourier_features",
        "source": '''
def random_fourier_features(x, W):
    proj = x @ W.transpose(-2, -1)
    return torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1)  # BUG: no sqrt(1 / D_random)
''',
        # The constant cancels in the attention ratio, so only the raw features can catch it.
        "must_lose": ["test_rff_features_hidden"],
    },
    {
        "name": "rff_divides_by_d_random",
        "function": "random_fourier_features",
        "source": '''
def random_fourier_features(x, W):
    proj = x @ W.transpose(-2, -1)
    return torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1) / W.shape[0]  # BUG: 1 / D_random, not its square root
''',
        "must_lose": ["test_rff_features_hidden"],
    },
    {
        "name": "rff_attention_sigma_squared_variance",
        "function": "rff_attention",
        "source": '''
def rff_attention(Q, K, V, num_features, seed):
    D = Q.shape[-1]
    generator = torch.Generator().manual_seed(seed)
    W = torch.randn(num_features, D, generator=generator, dtype=torch.float64) * D ** 0.25  # BUG: N(0, sigma^2 I)
    W = W.to(dtype=Q.dtype, device=Q.device)
    sigma2 = math.sqrt(D)

    def feature_map(x):
        return torch.exp(x.square().sum(-1, keepdim=True) / (2 * sigma2)) * random_fourier_features(x, W)

    return kernel_attention(Q, K, V, feature_map)
''',
        "must_lose": ["test_rff_attention_hidden_golden", "test_rff_attention_hidden_error"],
    },
    {
        "name": "rff_attention_gaussian_kernel_only",
        "function": "rff_attention",
        "source": '''
def rff_attention(Q, K, V, num_features, seed):
    D = Q.shape[-1]
    generator = torch.Generator().manual_seed(seed)
    W = torch.randn(num_features, D, generator=generator, dtype=torch.float64) / D ** 0.25
    W = W.to(dtype=Q.dtype, device=Q.device)
    # BUG: drops the key norm factor exp(|k|^2 / 2 sigma^2): Gaussian-kernel attention, not softmax
    return kernel_attention(Q, K, V, lambda x: random_fourier_features(x, W))
''',
        "must_lose": ["test_rff_attention_hidden_golden", "test_rff_attention_hidden_error"],
    },
    # ------------------------------------------------------------------ causal linear attention
    {
        "name": "causal_linear_excludes_current_position",
        "function": "causal_linear_attention",
        "source": '''
def causal_linear_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q), feature_map(K)
    kv = phi_k.unsqueeze(-1) * V.unsqueeze(-2)
    S = torch.cumsum(kv, dim=-3) - kv  # BUG: sums over j < i only
    Z = torch.cumsum(phi_k, dim=-2) - phi_k
    numerator = torch.einsum("...nf,...nfm->...nm", phi_q, S)
    return numerator / (phi_q * Z).sum(dim=-1, keepdim=True)
''',
        "must_lose": ["test_causal_linear_hidden_golden"],
    },
    {
        "name": "causal_linear_ignores_causality",
        "function": "causal_linear_attention",
        "source": '''
def causal_linear_attention(Q, K, V, feature_map):
    return kernel_attention(Q, K, V, feature_map)  # BUG: every position sees the whole sequence
''',
        "must_lose": ["test_causal_linear_hidden_golden", "test_causal_linear_hidden_causal"],
    },
    {
        "name": "causal_linear_denominator_not_causal",
        "function": "causal_linear_attention",
        "source": '''
def causal_linear_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q), feature_map(K)
    S = torch.cumsum(phi_k.unsqueeze(-1) * V.unsqueeze(-2), dim=-3)
    Z = phi_k.sum(dim=-2, keepdim=True)  # BUG: the normaliser sums over the whole sequence
    numerator = torch.einsum("...nf,...nfm->...nm", phi_q, S)
    return numerator / (phi_q * Z).sum(dim=-1, keepdim=True)
''',
        "must_lose": ["test_causal_linear_hidden_golden", "test_causal_linear_hidden_causal"],
    },
    # ------------------------------------------------------------------ positive random features
    {
        "name": "positive_features_without_norm_term",
        "function": "positive_random_features",
        "source": '''
def positive_random_features(x, W):
    return torch.exp(x @ W.transpose(-2, -1)) / math.sqrt(W.shape[0])  # BUG: no -|x|^2 / 2
''',
        "must_lose": ["test_positive_features_hidden", "test_performer_hidden_golden", "test_performer_hidden_error"],
    },
    {
        "name": "performer_without_rescaling",
        "function": "performer_attention",
        "source": '''
def performer_attention(Q, K, V, num_features, seed):
    D = Q.shape[-1]
    W = torch.randn(num_features, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    W = W.to(dtype=Q.dtype, device=Q.device)
    # BUG: no D ** -0.25 rescaling, so this approximates exp(q . k) instead of exp(q . k / sqrt(D))
    return kernel_attention(Q, K, V, lambda x: positive_random_features(x, W))
''',
        "must_lose": ["test_performer_hidden_golden", "test_performer_hidden_error"],
    },
    {
        "name": "causal_linear_masked_quadratic_form",
        "function": "causal_linear_attention",
        "source": '''
def causal_linear_attention(Q, K, V, feature_map):
    sim = feature_map(Q) @ feature_map(K).transpose(-2, -1)  # BUG: the right numbers, in O(N^2)
    n = Q.shape[-2]
    sim = sim * torch.ones(n, n, dtype=sim.dtype).tril()
    return (sim / sim.sum(-1, keepdim=True)) @ V
''',
        "must_lose": ["test_causal_linear_attention_hidden_linear_memory"],
    },
    {
        "name": "causal_linear_cumsum_over_dim_1",
        "function": "causal_linear_attention",
        "source": '''
def causal_linear_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q), feature_map(K)
    S = torch.cumsum(phi_k.unsqueeze(-1) * V.unsqueeze(-2), dim=1)  # BUG: dim 1 is the sequence only for 3-D inputs
    Z = torch.cumsum(phi_k, dim=1)
    return torch.einsum("...nf,...nfm->...nm", phi_q, S) / (phi_q * Z).sum(-1, keepdim=True)
''',
        "must_lose": ["test_causal_linear_hidden_golden"],
    },
    {
        "name": "kernel_attention_quadratic_form",
        "function": "kernel_attention",
        "source": '''
def kernel_attention(Q, K, V, feature_map):
    sim = feature_map(Q) @ feature_map(K).transpose(-2, -1)  # BUG: eq. (3) in O(N L), not eq. (5)
    return (sim / sim.sum(-1, keepdim=True)) @ V
''',
        "must_lose": ["test_kernel_attention_hidden_linear_memory"],
    },
    {
        "name": "kernel_attention_one_einsum",
        "function": "kernel_attention",
        "source": '''
def kernel_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q), feature_map(K)
    # BUG: one einsum over three operands contracts left to right: it builds the (N, L) matrix inside
    numerator = torch.einsum("...nf,...lf,...lm->...nm", phi_q, phi_k, V)
    return numerator / torch.einsum("...nf,...f->...n", phi_q, phi_k.sum(-2)).unsqueeze(-1)
''',
        "must_lose": ["test_kernel_attention_hidden_linear_memory"],
    },
    {
        "name": "softmax_boolean_index_mask",
        "function": "softmax_attention",
        "source": '''
def softmax_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores[~mask] = float("-inf")  # BUG: boolean indexing does not broadcast a (N, L) or (B, 1, N, L) mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights
''',
        "must_lose": ["test_softmax_hidden_masked"],
    },
    {
        "name": "rff_attention_draws_W_in_float32",
        "function": "rff_attention",
        "source": '''
def rff_attention(Q, K, V, num_features, seed):
    D = Q.shape[-1]
    W = torch.randn(num_features, D, generator=torch.Generator().manual_seed(seed)) / D ** 0.25  # BUG: not the recipe
    W = W.to(dtype=Q.dtype)

    def feature_map(x):
        return torch.exp(x.square().sum(-1, keepdim=True) / (2 * math.sqrt(D))) * random_fourier_features(x, W)

    return kernel_attention(Q, K, V, feature_map)
''',
        "must_lose": ["test_rff_attention_hidden_golden"],
        "must_fail_public": ["test_rff_attention_public"],
    },
    # ------------------------------------------------------------------ inputs changed in place
    # Each returns the right values but changes a tensor it was given: the hidden test that holds the
    # function's ``<area>/<function>_arguments_changed_by_the_call`` check loses, and so does its public check.
    {
        "name": "softmax_inverts_the_callers_mask",
        "function": "softmax_attention",
        "source": '''
def softmax_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not_(), float("-inf"))  # BUG: logical_not_ flips the caller's mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights
''',
        "must_lose": ["test_softmax_hidden_masked"],
        "must_fail_public": ["test_softmax_mask_and_stability"],
    },
    {
        "name": "quadratic_kernel_transposes_the_callers_K",
        "function": "quadratic_kernel",
        "source": '''
def quadratic_kernel(Q, K):
    return (Q @ K.transpose_(-2, -1)) ** 2  # BUG: transpose_ transposes the caller's K
''',
        "must_lose": ["test_quadratic_kernel_hidden"],
        "must_fail_public": ["test_quadratic_public"],
    },
    {
        "name": "quadratic_feature_map_squares_the_callers_x",
        "function": "quadratic_feature_map",
        "source": '''
def quadratic_feature_map(x):
    D = x.shape[-1]
    a, b = torch.triu_indices(D, D, offset=1)
    cross = math.sqrt(2.0) * x[..., a] * x[..., b]  # (..., D (D - 1) / 2)
    return torch.cat([x.square_(), cross], dim=-1)  # BUG: square_ squares the caller's x
''',
        "must_lose": ["test_quadratic_feature_map_hidden"],
        "must_fail_public": ["test_quadratic_public"],
    },
    {
        "name": "kernel_attention_rescales_the_callers_V",
        "function": "kernel_attention",
        "source": '''
def kernel_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q), feature_map(K)
    scale = V.abs().amax()
    V /= scale  # BUG: "for stability", but it divides the caller's V
    numerator = phi_q @ (phi_k.transpose(-2, -1) @ V)
    return scale * numerator / (phi_q @ phi_k.sum(dim=-2).unsqueeze(-1))
''',
        "must_lose": ["test_kernel_attention_hidden_self"],
        "must_fail_public": ["test_kernel_attention_public"],
    },
    {
        "name": "rff_features_transpose_the_callers_W",
        "function": "random_fourier_features",
        "source": '''
def random_fourier_features(x, W):
    proj = x @ W.t_()  # BUG: t_ transposes the caller's W
    return torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1) / math.sqrt(proj.shape[-1])
''',
        "must_lose": ["test_rff_features_hidden"],
        "must_fail_public": ["test_rff_features_public"],
    },
    {
        "name": "rff_attention_squares_the_callers_K",
        "function": "rff_attention",
        "source": '''
def rff_attention(Q, K, V, num_features, seed):
    D = Q.shape[-1]
    W = torch.randn(num_features, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) / D ** 0.25
    W = W.to(dtype=Q.dtype, device=Q.device)
    phi_q = random_fourier_features(Q, W)  # the query norm factor cancels
    phi_k = random_fourier_features(K, W)
    phi_k = phi_k * torch.exp(K.square_().sum(-1, keepdim=True) / (2 * math.sqrt(D)))  # BUG: square_ squares the caller's K
    numerator = phi_q @ (phi_k.transpose(-2, -1) @ V)
    return numerator / (phi_q @ phi_k.sum(-2).unsqueeze(-1))
''',
        "must_lose": ["test_rff_attention_hidden_golden"],
        "must_fail_public": ["test_rff_attention_public"],
    },
    {
        "name": "causal_linear_writes_outputs_into_V",
        "function": "causal_linear_attention",
        "source": '''
def causal_linear_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q), feature_map(K)
    S = torch.zeros(*phi_k.shape[:-2], phi_k.shape[-1], V.shape[-1], dtype=V.dtype)
    Z = torch.zeros(*phi_k.shape[:-2], phi_k.shape[-1], dtype=V.dtype)
    out = V  # BUG: not a new tensor: every output written below overwrites the caller's V
    for i in range(Q.shape[-2]):
        S = S + phi_k[..., i, :, None] * V[..., i, None, :]  # V_i is read before out_i replaces it
        Z = Z + phi_k[..., i, :]
        num = (phi_q[..., i, :, None] * S).sum(-2)
        out[..., i, :] = num / (phi_q[..., i, :] * Z).sum(-1, keepdim=True)
    return out
''',
        "must_lose": ["test_causal_linear_hidden_golden"],
        "must_fail_public": ["test_causal_linear_public"],
    },
    {
        "name": "positive_features_square_the_callers_x",
        "function": "positive_random_features",
        "source": '''
def positive_random_features(x, W):
    proj = x @ W.transpose(-2, -1)
    half_sq_norm = x.pow_(2).sum(dim=-1, keepdim=True) / 2  # BUG: pow_ squares the caller's x
    return torch.exp(proj - half_sq_norm) / math.sqrt(W.shape[0])
''',
        "must_lose": ["test_positive_features_hidden"],
        "must_fail_public": ["test_positive_features_public"],
    },
    {
        "name": "performer_rescales_the_callers_Q_and_K",
        "function": "performer_attention",
        "source": '''
def performer_attention(Q, K, V, num_features, seed):
    D = Q.shape[-1]
    W = torch.randn(num_features, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    W = W.to(dtype=Q.dtype, device=Q.device)
    Q *= D ** -0.25  # BUG: rescales the caller's queries and keys
    K *= D ** -0.25
    return kernel_attention(Q, K, V, lambda x: positive_random_features(x, W))
''',
        "must_lose": ["test_performer_hidden_golden"],
        "must_fail_public": ["test_positive_features_public"],
    },
]

CORRECT = [
    {
        "name": "softmax_float32_inside",
        "function": "softmax_attention",
        "source": '''
def softmax_attention(Q, K, V, mask=None):
    q, k, v = Q.float(), K.float(), V.float()  # float32 whatever the input
    scores = torch.einsum("...nd,...ld->...nl", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v).to(Q.dtype), weights.to(Q.dtype)
''',
    },
    {
        "name": "kernel_attention_float32_inside",
        "function": "kernel_attention",
        "source": '''
def kernel_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q).float(), feature_map(K).float()
    numerator = phi_q @ (phi_k.transpose(-2, -1) @ V.float())
    denominator = phi_q @ phi_k.sum(-2, keepdim=True).transpose(-2, -1)
    return (numerator / denominator).to(V.dtype)
''',
    },
    {
        "name": "softmax_einsum_float64_manual_max",
        "function": "softmax_attention",
        "source": '''
def softmax_attention(Q, K, V, mask=None):
    q, k, v = Q.double(), K.double(), V.double()
    scores = torch.einsum("...nd,...ld->...nl", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    e = scores.exp()
    weights = e / e.sum(dim=-1, keepdim=True)
    out = torch.einsum("...nl,...lm->...nm", weights, v)
    return out.to(Q.dtype), weights.to(Q.dtype)
''',
    },
    {
        "name": "softmax_additive_large_negative_mask",
        "function": "softmax_attention",
        "source": '''
def softmax_attention(Q, K, V, mask=None):
    scores = torch.matmul(Q, K.transpose(-1, -2)) * Q.shape[-1] ** -0.5
    if mask is not None:
        scores = scores + (~mask).to(scores.dtype) * -1e9
    weights = F.softmax(scores, dim=-1)
    return torch.matmul(weights, V), weights
''',
    },
    {
        "name": "quadratic_kernel_einsum",
        "function": "quadratic_kernel",
        "source": '''
def quadratic_kernel(Q, K):
    return torch.einsum("...nd,...ld->...nl", Q, K).pow(2)
''',
    },
    {
        "name": "quadratic_feature_map_symmetric_sqrt2",
        "function": "quadratic_feature_map",
        "source": '''
def quadratic_feature_map(x):
    D = x.shape[-1]
    a, b = torch.triu_indices(D, D)
    weight = torch.where(a == b, 1.0, math.sqrt(2.0)).to(x.dtype)
    return x[..., a] * x[..., b] * weight  # (..., D (D + 1) / 2)
''',
    },
    {
        "name": "kernel_attention_einsum",
        "function": "kernel_attention",
        "source": '''
def kernel_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q), feature_map(K)
    kv = torch.einsum("...lf,...lm->...fm", phi_k, V)
    numerator = torch.einsum("...nf,...fm->...nm", phi_q, kv)
    denominator = torch.einsum("...nf,...f->...n", phi_q, phi_k.sum(-2))
    return numerator / denominator.unsqueeze(-1)
''',
    },
    {
        "name": "rff_stack_features",
        "function": "random_fourier_features",
        "source": '''
def random_fourier_features(x, W):
    proj = torch.einsum("...d,rd->...r", x, W)
    return torch.cat((proj.sin(), proj.cos()), -1) * (1.0 / W.shape[0]) ** 0.5
''',
    },
    {
        "name": "rff_attention_key_factor_only",
        "function": "rff_attention",
        "source": '''
def rff_attention(Q, K, V, num_features, seed):
    D = Q.shape[-1]
    W = torch.randn(num_features, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) / D ** 0.25
    W = W.to(dtype=Q.dtype, device=Q.device)
    phi_q = random_fourier_features(Q, W)  # the query norm factor cancels
    phi_k = random_fourier_features(K, W) * torch.exp(K.square().sum(-1, keepdim=True) / (2 * math.sqrt(D)))
    numerator = phi_q @ (phi_k.transpose(-2, -1) @ V)
    denominator = phi_q @ phi_k.sum(-2).unsqueeze(-1)
    return numerator / denominator
''',
    },
    {
        "name": "causal_linear_python_loop",
        "function": "causal_linear_attention",
        "source": '''
def causal_linear_attention(Q, K, V, feature_map):
    phi_q, phi_k = feature_map(Q), feature_map(K)
    S = torch.zeros(*phi_k.shape[:-2], phi_k.shape[-1], V.shape[-1], dtype=V.dtype)
    Z = torch.zeros(*phi_k.shape[:-2], phi_k.shape[-1], dtype=V.dtype)
    outs = []
    for i in range(Q.shape[-2]):
        S = S + phi_k[..., i, :, None] * V[..., i, None, :]
        Z = Z + phi_k[..., i, :]
        num = (phi_q[..., i, :, None] * S).sum(-2)
        den = (phi_q[..., i, :] * Z).sum(-1, keepdim=True)
        outs.append(num / den)
    return torch.stack(outs, dim=-2)
''',
    },
    {
        "name": "positive_features_log_space",
        "function": "positive_random_features",
        "source": '''
def positive_random_features(x, W):
    log_phi = torch.einsum("...d,rd->...r", x, W) - 0.5 * (x * x).sum(-1, keepdim=True) - 0.5 * math.log(W.shape[0])
    return log_phi.exp()
''',
    },
    {
        "name": "performer_rescale_inside_feature_map",
        "function": "performer_attention",
        "source": '''
def performer_attention(Q, K, V, num_features, seed):
    D = Q.shape[-1]
    W = torch.randn(num_features, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    W = W.to(dtype=Q.dtype, device=Q.device)

    def feature_map(x):
        return positive_random_features(x / D ** 0.25, W)

    return kernel_attention(Q, K, V, feature_map)
''',
    },
]


#: Implements nothing: every graded function returns zeros of the right shape and dtype (and
#: ``largest_intermediate`` finds no tensor). ``adversarial.forges_every_number`` adds the lies.
IMPLEMENTS_NOTHING = """
import torch, helpers.kernel_attention as ka, helpers.memory as memory
def _zeros(Q, K, V, *rest, **kwargs):
    return torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=V.dtype)
def softmax_attention(Q, K, V, mask=None):
    return _zeros(Q, K, V), torch.full((*Q.shape[:-1], K.shape[-2]), 1.0 / K.shape[-2], dtype=Q.dtype)
def quadratic_kernel(Q, K):
    return torch.zeros(*Q.shape[:-1], K.shape[-2], dtype=Q.dtype)
def quadratic_feature_map(x):
    return torch.zeros(*x.shape[:-1], x.shape[-1] ** 2, dtype=x.dtype)
def random_fourier_features(x, W):
    return torch.zeros(*x.shape[:-1], 2 * W.shape[0], dtype=x.dtype)
def positive_random_features(x, W):
    return torch.zeros(*x.shape[:-1], W.shape[0], dtype=x.dtype)
def kernel_attention(Q, K, V, feature_map):
    return _zeros(Q, K, V)
causal_linear_attention = kernel_attention
def rff_attention(Q, K, V, num_features, seed):
    return _zeros(Q, K, V)
performer_attention = rff_attention
_forged = {name: globals()[name] for name in ("softmax_attention", "quadratic_kernel", "quadratic_feature_map",
           "random_fourier_features", "positive_random_features", "kernel_attention", "causal_linear_attention",
           "rff_attention", "performer_attention")}
ka.largest_intermediate = memory.largest_intermediate = lambda fn, *args, **kwargs: (fn(*args, **kwargs), 0, ())
"""

#: The hidden tests that rest on properties alone, each passed by a one-line function as well as by
#: ``adversarial.forges_the_collected_values``: exact softmax attention is within the error bounds of
#: both random-feature approximations, and ``V.cumsum(-2)`` is causal and uses the past.
FORGEABLE_PROPERTIES = {"test_rff_attention_hidden_error", "test_performer_hidden_error", "test_causal_linear_hidden_causal"}


# A notebook takes about 15 s to grade: known-wrong variants share notebooks where no test one must fail
# reaches a function another replaces (``pack_wrong``); correct alternatives are packed together.
pack_wrong(WRONG, master("kernel_attention"))
pack_correct(CORRECT)
