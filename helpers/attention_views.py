"""bertviz's attention views, drawn offline.

bertviz draws with JavaScript that fetches require.js, d3 and jQuery from a CDN: without network a
student sees an empty cell. These wrappers take bertviz's own HTML (``html_action="return"``), drop
the CDN script and inline the same libraries from installed packages instead: d3 5.7.0 from
``mpld3`` (the version bertviz asks for) and jQuery from ``sphinxcontrib-jquery``. The libraries are
loaded into private variables, so a page that already has its own d3, jQuery or RequireJS (the
classic notebook) is left as it was.

``neuron_view`` also needs a model from bertviz's own copy of BERT (it returns queries and keys):
``bertviz_bert`` copies the weights of a transformers ``BertModel`` into one, in memory (a second or
so, nothing written to disk).
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

__all__ = ["head_view", "model_view", "neuron_view", "bertviz_bert", "offline_html"]

_ASSETS = {  # library -> (pip package, import name, file inside it)
    "d3": ("mpld3==0.5.12", "mpld3", "js/d3.v5.min.js"),
    "jquery": ("sphinxcontrib-jquery==4.1 (with --no-deps)", "sphinxcontrib.jquery", "jquery.js"),
}
_CDN_SCRIPT = re.compile(r'<script src="https://cdnjs\.cloudflare\.com/[^"]*"></script>')
_SCRIPT = re.compile(r'(<script type="text/javascript">)(.*?)(</script>)', re.S)


@lru_cache(maxsize=None)
def _asset(name: str) -> str:
    package, module, inside = _ASSETS[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the attention views need {package}: pip install {package}")
    return (Path(list(spec.submodule_search_locations)[0]) / inside).read_text(encoding="utf-8")


def _loader() -> str:
    """A script that evaluates d3 and jQuery once per page into ``window.__courseViews``, hiding any
    AMD ``define`` or CommonJS ``module`` so that both register nowhere else."""
    return ("<script type=\"text/javascript\">\nif (!window.__courseViews) { (function () {\n"
            "  var box = {};\n"
            "  (function (define, module, exports) {\n" + _asset("d3") + "\n  }).call(box);\n"
            "  var previous = {jQuery: window.jQuery, $: window.$};\n"
            "  (function (define, module, exports) {\n" + _asset("jquery") + "\n  }).call(window);\n"
            "  var jq = window.jQuery;\n"
            "  window.jQuery = previous.jQuery; window.$ = previous.$;\n"
            "  window.__courseViews = {d3: box.d3, jquery: jq};\n"
            "})(); }\n</script>\n")


def offline_html(html: str) -> str:
    """bertviz's returned HTML made to draw without network: no CDN script, the libraries inlined,
    and its ``require``/``requirejs`` calls answered from them."""
    shim = ("(function () { var libs = window.__courseViews;\n"
            "var require = {config: function () {}};\n"
            "var requirejs = function (names, callback) { callback.apply(null, names.map(function (n) { return libs[n]; })); };\n")

    def wrap(match: re.Match) -> str:
        body = match.group(2)
        if "requirejs(" not in body:
            return match.group(0)
        return match.group(1) + "\n" + shim + body + "\n})();\n" + match.group(3)

    return _loader() + _SCRIPT.sub(wrap, _CDN_SCRIPT.sub("", html))


def _rounded(values):
    """``values`` to 3 decimals, in float64 (so that they print short): the page stores every
    number as JSON text, and float32 values print with 17 digits (a view would be 2.5x larger)."""
    import torch

    return torch.round(values.detach().double(), decimals=3)


def _show(html) -> None:
    from IPython.display import HTML, display

    display(HTML(offline_html(html.data)))


def head_view(attention, tokens, sentence_b_start=None, **options):
    """bertviz's ``head_view`` (one layer, the heads overlaid), drawn offline.

    ``attention``: the model's per-layer tuple of ``(1, heads, T, T)`` tensors; ``tokens``: the T
    token strings; ``sentence_b_start``: where the second sentence of a pair starts.
    """
    from bertviz import head_view as bertviz_head_view

    return _show(bertviz_head_view(tuple(map(_rounded, attention)), tokens, sentence_b_start, html_action="return", **options))


def model_view(attention, tokens, sentence_b_start=None, **options):
    """bertviz's ``model_view`` (every layer and head as a thumbnail), drawn offline.
    ``include_layers=[...]`` keeps the page small for deep models."""
    from bertviz import model_view as bertviz_model_view

    return _show(bertviz_model_view(tuple(map(_rounded, attention)), tokens, sentence_b_start, html_action="return", **options))


def bertviz_bert(model):
    """bertviz's neuron-view ``BertModel`` with the weights of a transformers ``BertModel``."""
    from bertviz.transformers_neuron_view.modeling_bert import BertConfig, BertModel

    c = model.config
    config = BertConfig(vocab_size_or_config_json_file=c.vocab_size, hidden_size=c.hidden_size,
                        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
                        intermediate_size=c.intermediate_size, hidden_act=c.hidden_act,
                        max_position_embeddings=c.max_position_embeddings, type_vocab_size=c.type_vocab_size,
                        layer_norm_eps=c.layer_norm_eps)
    config.output_attentions = True
    viewer = BertModel(config)
    viewer.load_state_dict(model.state_dict())  # the same parameter names: every weight is copied
    viewer.register_forward_hook(_round_neuron_data)
    return viewer.eval()


def _round_neuron_data(module, args, output):
    """The attentions, queries and keys the neuron view stores as JSON, to 3 decimals (see
    ``_rounded``): the page of one neuron view shrinks from about 6 MB to about 2 MB."""
    for layer in output[-1]:
        for name in ("attn", "queries", "keys"):
            layer[name] = _rounded(layer[name])
    return output


def neuron_view(viewer, tokenizer, sentence_a, sentence_b=None, layer=0, head=0, **options):
    """bertviz's ``neuron_view`` (one head's queries, keys and their products), drawn offline.
    ``viewer`` comes from :func:`bertviz_bert`; the tokenizer is the model's own."""
    from bertviz.neuron_view import show

    return _show(show(viewer, "bert", tokenizer, sentence_a, sentence_b, layer=layer, head=head,
                      html_action="return", **options))
