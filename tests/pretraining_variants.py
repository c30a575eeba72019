"""Known-wrong and known-correct implementations for the ``pretraining`` assignment.

Pure data, no tests; the same contract as ``kernel_attention_variants``:

* every ``WRONG`` entry must fail each hidden test named in ``must_lose``, and each public check
  named in ``must_fail_public`` (so the student sees the bug before submitting);
* every ``CORRECT`` entry must pass every hidden test and every public check.

Sources may use what the notebook's setup cell imports (``math``, ``torch``, ``nn``, ``F``, ``MASK``,
``PAD``) and the other functions and classes the students write.
"""

from tests.support.notebook_edits import master, pack_correct, pack_wrong

_ATTENTION_HEAD = '''
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.query = nn.Linear(n_embd, n_embd)
        self.key = nn.Linear(n_embd, n_embd)
        self.value = nn.Linear(n_embd, n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        h = self.n_head
'''

_SPLIT_HEADS = '''
q = self.query(x).view(B, T, h, C // h).transpose(1, 2)
k = self.key(x).view(B, T, h, C // h).transpose(1, 2)
v = self.value(x).view(B, T, h, C // h).transpose(1, 2)
'''

_FINETUNE = '''
def finetune_example(question, answer, block_size):
    text = question + MASK + answer + MASK
    if len(text) > block_size + 1:
        raise ValueError("too long")
    text = text + PAD * (block_size + 1 - len(text))
    x, y = text[:-1], text[1:]
    return x, PAD * (len(question) - 1) + y[len(question) - 1:]
'''

_SYNTH_HEAD = '''
class SynthesizerAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.w1 = nn.Linear(n_embd, n_embd)
        self.w2 = nn.Parameter(torch.empty(n_embd // n_head, block_size).uniform_(-0.001, 0.001))
        self.b2 = nn.Parameter(torch.zeros(block_size))
        self.value = nn.Linear(n_embd, n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        h = self.n_head
'''


def _method(head: str, body: str) -> str:
    return head + "\n".join("        " + line for line in body.strip("\n").splitlines()) + "\n"


def _attention(rest: str) -> str:
    """A CausalSelfAttention whose forward splits q, k and v into heads as usual, then runs ``rest``."""
    return _method(_ATTENTION_HEAD, _SPLIT_HEADS + rest.lstrip("\n"))


def _finetune(lines: str, buggy: str) -> str:
    """A finetune_example as specified, with its body's ``lines`` replaced by ``buggy``."""
    body = lambda text: "".join(f"    {line}\n" for line in text.splitlines())  # noqa: E731
    assert body(lines) in _FINETUNE, lines
    return _FINETUNE.replace(body(lines), body(buggy))


def _span(body: str) -> str:
    """A span_corrupt that runs ``body`` (which sets prefix, masked, suffix from ``text``) after the
    truncation, then rearranges and pads as described."""
    return ('''
def span_corrupt(document, block_size, generator):
    length = int(torch.randint(4, int(block_size * 7 / 8) + 1, (1,), generator=generator))
    text = document[:length]
    n = len(text)
''' + "\n".join("    " + line for line in body.strip("\n").splitlines()) + '''
    s = prefix + MASK + suffix + MASK + masked
    s = s + PAD * (block_size + 1 - len(s))
    return s[:-1], s[1:]
''')


_CUT = '''
span = int(torch.randint(0, n // 2 + 1, (1,), generator=generator))
start = int(torch.randint(0, n - span + 1, (1,), generator=generator))
prefix, masked, suffix = text[:start], text[start:start + span], text[start + span:]
'''

WRONG = [
    # ------------------------------------------------------------------ span corruption
    {
        "name": "span_y_not_shifted",
        "function": "span_corrupt",
        "source": _span(_CUT).replace("return s[:-1], s[1:]", "return s[:-1], s[:-1]  # BUG: y is not shifted"),
        "must_lose": ["test_span_hidden_structure"],
        "must_fail_public": ["test_span_public"],
    },
    {
        "name": "span_before_suffix",
        "function": "span_corrupt",
        "source": _span(_CUT).replace("s = prefix + MASK + suffix + MASK + masked",
                                      "s = prefix + MASK + masked + MASK + suffix  # BUG: the span in place"),
        "must_lose": ["test_span_hidden_structure"],
        "must_fail_public": ["test_span_public"],
    },
    {
        "name": "span_always_longest_truncation",
        "function": "span_corrupt",
        "source": _span(_CUT).replace("length = int(torch.randint(4, int(block_size * 7 / 8) + 1, (1,), generator=generator))",
                                      "length = int(block_size * 7 / 8)  # BUG: never a random length"),
        "must_lose": ["test_span_hidden_distributions"],
        "must_fail_public": ["test_span_public"],
    },
    {
        "name": "span_truncated_to_block_size",  # BUG: lengths up to block_size - 2, not 7/8 of it
        "function": "span_corrupt",
        "source": _span(_CUT).replace("int(block_size * 7 / 8) + 1", "block_size - 1"),
        "must_lose": ["test_span_hidden_structure"],
        "must_fail_public": ["test_span_public"],
    },
    {
        "name": "span_half_of_the_text_on_average",
        "function": "span_corrupt",
        "source": _span(_CUT.replace("torch.randint(0, n // 2 + 1,", "torch.randint(0, n + 1,  # BUG: mean n/2\n   ")),
        "must_lose": ["test_span_hidden_distributions"],
        "must_fail_public": ["test_span_public"],
    },
    {
        "name": "span_always_a_quarter",
        "function": "span_corrupt",
        "source": _span(_CUT.replace("span = int(torch.randint(0, n // 2 + 1, (1,), generator=generator))",
                                     "span = n // 4  # BUG: right on average, but never random")),
        "must_lose": ["test_span_hidden_distributions"],
        "must_fail_public": ["test_span_public"],
    },
    {
        "name": "span_always_at_the_end",
        "function": "span_corrupt",
        "source": _span(_CUT.replace("start = int(torch.randint(0, n - span + 1, (1,), generator=generator))",
                                     "start = n - span  # BUG: always the last characters")),
        "must_lose": ["test_span_hidden_distributions"],
        "must_fail_public": ["test_span_public"],
    },
    {
        "name": "span_python_random",
        "function": "span_corrupt",
        "source": '''
def span_corrupt(document, block_size, generator):
    import random
    text = document[:random.randint(4, int(block_size * 7 / 8))]  # BUG: not the given generator
    n = len(text)
    span = random.randint(0, n // 2)
    start = random.randint(0, n - span)
    s = text[:start] + MASK + text[start + span:] + MASK + text[start:start + span]
    s = s + PAD * (block_size + 1 - len(s))
    return s[:-1], s[1:]
''',
        "must_lose": ["test_span_hidden_generator"],
        "must_fail_public": ["test_span_public"],
    },
    {
        "name": "span_padded_to_block_size",
        "function": "span_corrupt",
        "source": _span(_CUT).replace("PAD * (block_size + 1 - len(s))", "PAD * (block_size - len(s))  # BUG: one short"),
        "must_lose": ["test_span_hidden_structure"],
        "must_fail_public": ["test_span_public"],
    },
    # ------------------------------------------------------------------ finetuning examples
    {
        "name": "finetune_loss_on_the_question",
        "function": "finetune_example",
        "source": _finetune("x, y = text[:-1], text[1:]\n"
                            "return x, PAD * (len(question) - 1) + y[len(question) - 1:]",
                            "return text[:-1], text[1:]  # BUG: the question stays in the loss"),
        "must_lose": ["test_finetune_hidden"],
        "must_fail_public": ["test_finetune_public"],
    },
    {
        "name": "finetune_first_mask_hidden_too",
        "function": "finetune_example",
        "source": _finetune("return x, PAD * (len(question) - 1) + y[len(question) - 1:]",
                            "return x, PAD * len(question) + y[len(question):]  # BUG: one PAD too many"),
        "must_lose": ["test_finetune_hidden"],
        "must_fail_public": ["test_finetune_public"],
    },
    {
        "name": "finetune_silently_truncates",
        "function": "finetune_example",
        "source": _finetune('text = question + MASK + answer + MASK\n'
                            'if len(text) > block_size + 1:\n'
                            '    raise ValueError("too long")',
                            "text = (question + MASK + answer + MASK)[:block_size + 1]  # BUG: no error, the answer is cut"),
        "must_lose": ["test_finetune_hidden_too_long"],
        "must_fail_public": ["test_finetune_public"],
    },
    {
        "name": "finetune_exact_fit_refused",
        "function": "finetune_example",
        "source": _finetune("if len(text) > block_size + 1:",
                            "if len(text) >= block_size + 1:  # BUG: an exact fit is refused"),
        "must_lose": ["test_finetune_hidden_too_long"],
        "must_fail_public": ["test_finetune_public"],
    },
    # ------------------------------------------------------------------ causal self-attention
    {
        "name": "attention_without_mask",
        "function": "CausalSelfAttention",
        "source": _attention('''
w = (q @ k.transpose(-2, -1) / math.sqrt(C // h)).softmax(-1)  # BUG: no causal mask
return self.proj((w @ v).transpose(1, 2).reshape(B, T, C))
'''),
        "must_lose": ["test_attention_hidden"],
        "must_fail_public": ["test_attention_public"],
    },
    {
        "name": "attention_scaled_by_the_full_width",
        "function": "CausalSelfAttention",
        "source": _attention('''
s = q @ k.transpose(-2, -1) / math.sqrt(C)  # BUG: sqrt(C), not sqrt(C / n_head)
w = s.masked_fill(self.mask[:T, :T] == 0, float("-inf")).softmax(-1)
return self.proj((w @ v).transpose(1, 2).reshape(B, T, C))
'''),
        "must_lose": ["test_attention_hidden"],
        "must_fail_public": ["test_attention_public"],
    },
    {
        "name": "attention_heads_interleaved",
        "function": "CausalSelfAttention",
        "source": _method(_ATTENTION_HEAD, '''
q = self.query(x).view(B, T, C // h, h).permute(0, 3, 1, 2)  # BUG: head h gets channels h, h + n_head, ...
k = self.key(x).view(B, T, C // h, h).permute(0, 3, 1, 2)
v = self.value(x).view(B, T, C // h, h).permute(0, 3, 1, 2)
s = q @ k.transpose(-2, -1) / math.sqrt(C // h)
w = s.masked_fill(self.mask[:T, :T] == 0, float("-inf")).softmax(-1)
return self.proj((w @ v).permute(0, 2, 3, 1).reshape(B, T, C))
'''),
        "must_lose": ["test_attention_hidden"],
        "must_fail_public": ["test_attention_public"],
    },
    {
        "name": "attention_softmax_over_queries",
        "function": "CausalSelfAttention",
        "source": _attention('''
s = (q @ k.transpose(-2, -1) / math.sqrt(C // h)).masked_fill(self.mask[:T, :T] == 0, float("-inf"))
w = torch.nan_to_num(s.softmax(-2))  # BUG: normalised over the queries
return self.proj((w @ v).transpose(1, 2).reshape(B, T, C))
'''),
        "must_lose": ["test_attention_hidden"],
        "must_fail_public": ["test_attention_public"],
    },
    {
        "name": "attention_without_output_projection",
        "function": "CausalSelfAttention",
        "source": _attention('''
s = (q @ k.transpose(-2, -1) / math.sqrt(C // h)).masked_fill(self.mask[:T, :T] == 0, float("-inf"))
return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)  # BUG: no self.proj
'''),
        "must_lose": ["test_attention_hidden"],
        "must_fail_public": ["test_attention_public"],
    },
    {
        "name": "attention_keys_score_queries",
        "function": "CausalSelfAttention",
        "source": _attention('''
s = k @ q.transpose(-2, -1) / math.sqrt(C // h)  # BUG: entry (i, j) is k_i . q_j
w = s.masked_fill(self.mask[:T, :T] == 0, float("-inf")).softmax(-1)
return self.proj((w @ v).transpose(1, 2).reshape(B, T, C))
'''),
        "must_lose": ["test_attention_hidden"],
        "must_fail_public": ["test_attention_public"],
    },
    # ------------------------------------------------------------------ synthesizer
    {
        "name": "synthesizer_without_relu",
        "function": "SynthesizerAttention",
        "source": _method(_SYNTH_HEAD, '''
a = self.w1(x).view(B, T, h, C // h).transpose(1, 2)  # BUG: no ReLU
s = (a @ self.w2[:, :T] + self.b2[:T]).masked_fill(self.mask[:T, :T] == 0, float("-inf"))
v = self.value(x).view(B, T, h, C // h).transpose(1, 2)
return self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))
'''),
        "must_lose": ["test_synthesizer_hidden"],
        "must_fail_public": ["test_synthesizer_public"],
    },
    {
        "name": "synthesizer_without_bias",
        "function": "SynthesizerAttention",
        "source": _method(_SYNTH_HEAD, '''
a = F.relu(self.w1(x)).view(B, T, h, C // h).transpose(1, 2)
s = (a @ self.w2[:, :T]).masked_fill(self.mask[:T, :T] == 0, float("-inf"))  # BUG: b2 left out
v = self.value(x).view(B, T, h, C // h).transpose(1, 2)
return self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))
'''),
        "must_lose": ["test_synthesizer_hidden"],
        "must_fail_public": ["test_synthesizer_public"],
    },
    {
        "name": "synthesizer_without_mask",
        "function": "SynthesizerAttention",
        "source": _method(_SYNTH_HEAD, '''
a = F.relu(self.w1(x)).view(B, T, h, C // h).transpose(1, 2)
s = a @ self.w2[:, :T] + self.b2[:T]  # BUG: no causal mask
v = self.value(x).view(B, T, h, C // h).transpose(1, 2)
return self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))
'''),
        "must_lose": ["test_synthesizer_hidden"],
        "must_fail_public": ["test_synthesizer_public"],
    },
    {
        "name": "span_length_upper_bound_excluded",  # torch.randint's high is excluded: L never reaches 7/8
        "function": "span_corrupt",
        "source": '''
def span_corrupt(document, block_size, generator):
    length = int(torch.randint(4, int(block_size * 7 / 8), (1,), generator=generator))  # BUG: high excluded
    text = document[:length]
    n = len(text)
    span = int(torch.randint(0, n // 2 + 1, (1,), generator=generator))
    start = int(torch.randint(0, n - span + 1, (1,), generator=generator))
    prefix, masked, suffix = text[:start], text[start:start + span], text[start + span:]
    s = prefix + MASK + suffix + MASK + masked
    s = s + PAD * (block_size + 1 - len(s))
    return s[:-1], s[1:]
''',
        "must_lose": ["test_span_hidden_distributions"],
        "must_fail_public": ["test_span_public"],
    },
    # ------------------------------------------------------------------ baseline and metric
    {
        "name": "baseline_from_the_dev_places",
        "function": "most_common_baseline",
        "source": '''
def most_common_baseline(train, dev):
    from collections import Counter
    place = Counter(p for _, p in dev).most_common(1)[0][0]  # BUG: looks at the answers
    return [place] * len(dev)
''',
        "must_lose": ["test_baseline_hidden"],
        "must_fail_public": ["test_baseline_public"],
    },
    {
        "name": "baseline_first_train_place",
        "function": "most_common_baseline",
        "source": '''
def most_common_baseline(train, dev):
    return [train[0][1]] * len(dev)  # BUG: the first place, not the most common
''',
        "must_lose": ["test_baseline_hidden"],
        "must_fail_public": ["test_baseline_public"],
    },
    {
        "name": "baseline_counts_train_and_dev",
        "function": "most_common_baseline",
        "source": '''
def most_common_baseline(train, dev):
    from collections import Counter
    place = Counter(p for _, p in train + dev).most_common(1)[0][0]  # BUG: the dev places count too
    return [place] * len(dev)
''',
        "must_lose": ["test_baseline_hidden"],
        "must_fail_public": ["test_baseline_public"],
    },
    {
        "name": "exact_match_ignores_case",
        "function": "exact_match",
        "source": '''
def exact_match(predictions, answers):
    if len(predictions) != len(answers) or not answers:
        raise ValueError("lengths")
    return sum(p.lower() == a.lower() for p, a in zip(predictions, answers)) / len(answers)  # BUG
''',
        "must_lose": ["test_exact_match_hidden"],
        "must_fail_public": ["test_baseline_public"],
    },
    {
        "name": "exact_match_counts",
        "function": "exact_match",
        "source": '''
def exact_match(predictions, answers):
    if len(predictions) != len(answers) or not answers:
        raise ValueError("lengths")
    return sum(p == a for p, a in zip(predictions, answers))  # BUG: a count, not a fraction
''',
        "must_lose": ["test_exact_match_hidden", "test_baseline_hidden"],
        "must_fail_public": ["test_baseline_public"],
    },
    {
        "name": "exact_match_refuses_only_empty_answers",
        "function": "exact_match",
        "source": '''
def exact_match(predictions, answers):
    if not answers:
        raise ValueError("no answers")
    return sum(p == a for p, a in zip(predictions, answers)) / len(answers)  # BUG: unequal lengths pass
''',
        "must_lose": ["test_exact_match_hidden"],
        "must_fail_public": ["test_baseline_public"],
    },
    {
        "name": "exact_match_zips_unequal_lists",
        "function": "exact_match",
        "source": '''
def exact_match(predictions, answers):
    pairs = list(zip(predictions, answers))  # BUG: unequal lengths pass silently
    return sum(p == a for p, a in pairs) / max(1, len(pairs))
''',
        "must_lose": ["test_exact_match_hidden"],
        "must_fail_public": ["test_baseline_public"],
    },
    # ------------------------------------------------------------------ arguments changed in place
    # Each returns the right values and changes its argument x: the hidden check
    # ``<area>/<function>_arguments_changed_by_the_call`` catches it.
    {
        "name": "attention_output_written_over_its_input",
        "function": "CausalSelfAttention",
        "source": _attention('''
s = (q @ k.transpose(-2, -1) / math.sqrt(C // h)).masked_fill(self.mask[:T, :T] == 0, float("-inf"))
out = self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))
return x.copy_(out)  # BUG: the output overwrites the caller's x
'''),
        "must_lose": ["test_attention_hidden"],
        "must_fail_public": ["test_attention_public"],
    },
    {
        "name": "synthesizer_output_written_over_its_input",
        "function": "SynthesizerAttention",
        "source": _method(_SYNTH_HEAD, '''
a = F.relu(self.w1(x)).view(B, T, h, C // h).transpose(1, 2)
s = (a @ self.w2[:, :T] + self.b2[:T]).masked_fill(self.mask[:T, :T] == 0, float("-inf"))
v = self.value(x).view(B, T, h, C // h).transpose(1, 2)
return x.copy_(self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)))  # BUG: the output overwrites the caller's x
'''),
        "must_lose": ["test_synthesizer_hidden"],
        "must_fail_public": ["test_synthesizer_public"],
    },
]

CORRECT = [
    {
        "name": "span_cut_start_first_with_float_draws",
        "function": "span_corrupt",
        "source": '''
def span_corrupt(document, block_size, generator):
    longest = int(block_size * 7 / 8)
    length = 4 + int(torch.rand(1, generator=generator, dtype=torch.float64) * (longest - 3))
    text = document[:length]
    n = len(text)
    span = int(torch.rand(1, generator=generator, dtype=torch.float64) * (n / 2 + 1))
    start = int(torch.rand(1, generator=generator, dtype=torch.float64) * (n - span + 1))
    pieces = [text[:start], MASK, text[start + span:], MASK, text[start:start + span]]
    s = "".join(pieces).ljust(block_size + 1, PAD)
    return s[:block_size], s[1:]
''',
    },
    {
        "name": "finetune_with_lists",
        "function": "finetune_example",
        "source": '''
def finetune_example(question, answer, block_size):
    chars = list(question) + [MASK] + list(answer) + [MASK]
    if len(chars) > block_size + 1:
        raise ValueError(f"{len(chars)} characters do not fit in block_size + 1 = {block_size + 1}")
    chars += [PAD] * (block_size + 1 - len(chars))
    x = chars[:-1]
    y = [PAD if i < len(question) - 1 else c for i, c in enumerate(chars[1:])]
    return "".join(x), "".join(y)
''',
    },
    {
        "name": "attention_with_einsum",
        "function": "CausalSelfAttention",
        "source": _method(_ATTENTION_HEAD, '''
d = C // h
q = self.query(x).reshape(B, T, h, d)
k = self.key(x).reshape(B, T, h, d)
v = self.value(x).reshape(B, T, h, d)
s = torch.einsum("bihd,bjhd->bhij", q, k) / d ** 0.5
s = s.masked_fill(~self.mask[:T, :T].bool(), float("-inf"))
y = torch.einsum("bhij,bjhd->bihd", s.softmax(dim=3), v).reshape(B, T, C)
return self.proj(y)
'''),
    },
    {
        "name": "attention_with_torch_sdpa",
        "function": "CausalSelfAttention",
        "source": _method(_ATTENTION_HEAD, '''
q, k, v = (layer(x).view(B, T, h, C // h).transpose(1, 2) for layer in (self.query, self.key, self.value))
y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
return self.proj(y.transpose(1, 2).reshape(B, T, C))
'''),
    },
    {
        "name": "synthesizer_one_head_at_a_time",
        "function": "SynthesizerAttention",
        "source": _method(_SYNTH_HEAD, '''
d = C // h
a, v = F.relu(self.w1(x)), self.value(x)
causal = torch.ones(T, T, dtype=torch.bool).tril()
outs = []
for head in range(h):
    part = slice(head * d, (head + 1) * d)
    scores = a[..., part] @ self.w2[:, :T] + self.b2[:T]
    weights = torch.where(causal, scores, torch.tensor(float("-inf"), dtype=scores.dtype)).softmax(-1)
    outs.append(weights @ v[..., part])
return self.proj(torch.cat(outs, dim=-1))
'''),
    },
    {
        "name": "baseline_and_metric_by_hand",
        "edits": [
            ("most_common_baseline", '''
def most_common_baseline(train, dev):
    counts = {}
    for _, place in train:
        counts[place] = counts.get(place, 0) + 1
    best = max(counts, key=counts.get)
    return [best for _ in dev]
'''),
            ("exact_match", '''
def exact_match(predictions, answers):
    import numpy as np
    predictions, answers = list(predictions), list(answers)
    if len(predictions) != len(answers) or len(answers) == 0:
        raise ValueError("need as many predictions as answers, and at least one")
    return float(np.mean([p == a for p, a in zip(predictions, answers)]))
'''),
        ],
    },
]


#: Implements nothing: the two functions properties test return blank strings of the right length,
#: and the course's reader of span examples finds every example fine (a helper runs in the kernel too).
IMPLEMENTS_NOTHING = """
import helpers.pretraining as pretraining
pretraining.read_span_example = lambda x, y, document, block_size: ("ab", "c", "d", None)
def span_corrupt(document, block_size, generator):
    return " " * block_size, " " * block_size
def finetune_example(question, answer, block_size):
    return " " * block_size, " " * block_size
_forged = {"span_corrupt": span_corrupt, "finetune_example": finetune_example}
"""

#: Rests on properties alone, passed by ``adversarial.forges_the_collected_values`` and by any
#: function that draws its (even meaningless) examples from the generator.
FORGEABLE_PROPERTIES = {"test_span_hidden_generator"}


pack_wrong(WRONG, master("pretraining"))
pack_correct(CORRECT)
