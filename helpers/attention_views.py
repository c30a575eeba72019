"""bertviz's attention views, drawn offline.

bertviz draws with JavaScript that fetches require.js, d3 and jQuery from a CDN: without network a
student sees an empty cell. These wrappers take bertviz's own HTML (``html_action="return"``), drop
the CDN script and inline the same libraries from installed packages instead: d3 5.7.0 from
``mpld3`` (the version bertviz asks for) and jQuery from ``sphinxcontrib-jquery``. The libraries are
loaded into private variables, so a page that already has its own d3, jQuery or RequireJS (the
classic notebook) is left as it was.

A view's page is mostly numbers and the libraries are 330 KB, so each view is stored deflated
(the browser inflates it) and the libraries travel only with the first view of each cell: the
executed notebook stays a few MB instead of 12.

``neuron_view`` also needs a model from bertviz's own copy of BERT (it returns queries and keys):
``bertviz_bert`` copies the weights of a transformers ``BertModel`` into one, in memory (a second or
so, nothing written to disk).
"""

from __future__ import annotations

import base64
import importlib.util
import re
import uuid
import zlib
from functools import lru_cache
from pathlib import Path
from string import Template

__all__ = ["head_view", "model_view", "neuron_view", "bertviz_bert", "offline_html", "unpacked"]

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
    """JavaScript that evaluates d3 and jQuery once per page into ``window.__courseViews``, hiding
    any AMD ``define`` or CommonJS ``module`` so that both register nowhere else."""
    return ("if (!window.__courseViews) { (function () {\n"
            "  var box = {};\n"
            "  (function (define, module, exports) {\n" + _asset("d3") + "\n  }).call(box);\n"
            "  var previous = {jQuery: window.jQuery, $: window.$};\n"
            "  (function (define, module, exports) {\n" + _asset("jquery") + "\n  }).call(window);\n"
            "  var jq = window.jQuery;\n"
            "  window.jQuery = previous.jQuery; window.$ = previous.$;\n"
            "  window.__courseViews = {d3: box.d3, jquery: jq};\n"
            "})(); }\n")


def _packed(text: str) -> str:
    """``text`` deflated and base64-encoded: a view's numbers and the libraries shrink about fourfold.
    zlib's default level: on a 1.2 MB view of SmolLM2 it takes 0.03 s against 0.39 s at level 9,
    for a page 8% larger (0.16 MB against 0.14 MB)."""
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")


# The page side of a view. The view's own HTML arrives deflated; the browser inflates it
# (DecompressionStream: Chrome 80, Firefox 113, Safari 16.4) and runs its scripts in order. The
# libraries come with the first view of each cell (``window.__courseViewsReady``); a view without
# them waits for that promise, which the cell's first view has set by then.
_UNPACK = """<div class="course-attention-view" id="$ID">Drawing the attention view...</div>
<script type="text/javascript">
(function () {
  var box = document.getElementById("$ID");
  function say(text) { box.textContent = text; }
  function inflate(packed) {
    var bytes = Uint8Array.from(atob(packed), function (c) { return c.charCodeAt(0); });
    return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"))).text();
  }
  function draw(html) {
    box.innerHTML = html;
    box.querySelectorAll("script").forEach(function (old) {
      var script = document.createElement("script");
      script.text = old.text;
      old.replaceWith(script);
    });
  }
  if (typeof DecompressionStream === "undefined") {
    return say("This browser cannot unpack the attention view: use a recent Chrome, Firefox or Safari.");
  }
  var view = "$VIEW", libraries = "$LIBRARIES";
  if (libraries && !window.__courseViewsReady) {
    window.__courseViewsReady = inflate(libraries).then(function (code) { (new Function(code))(); });
  }
  var waited = 0;
  (function start() {
    if (!window.__courseViewsReady) {
      if ((waited += 100) > 20000) {
        return say("The drawing libraries come with the first attention view of a cell: run this cell again.");
      }
      return setTimeout(start, 100);
    }
    window.__courseViewsReady.then(function () { return inflate(view); }).then(draw, function (err) {
      say("The attention view could not be drawn: " + err);
    });
  })();
})();
</script>
"""


def offline_html(html: str, *, with_libraries: bool = True) -> str:
    """bertviz's returned HTML made to draw without network: no CDN script, its
    ``require``/``requirejs`` calls answered from d3 and jQuery inlined (``with_libraries``) or
    brought by an earlier view of the page, the whole deflated."""
    shim = ("(function () { var libs = window.__courseViews;\n"
            "var require = {config: function () {}};\n"
            "var requirejs = function (names, callback) { callback.apply(null, names.map(function (n) { return libs[n]; })); };\n")

    def wrap(match: re.Match) -> str:
        body = match.group(2)
        if "requirejs(" not in body:
            return match.group(0)
        return match.group(1) + "\n" + shim + body + "\n})();\n" + match.group(3)

    view = _SCRIPT.sub(wrap, _CDN_SCRIPT.sub("", html))
    return Template(_UNPACK).substitute(ID=f"course-view-{uuid.uuid4().hex[:12]}", VIEW=_packed(view),
                                        LIBRARIES=_packed(_loader()) if with_libraries else "")


def unpacked(page: str) -> tuple[str, str]:
    """(the view's HTML, the libraries' code or "") inside a page :func:`offline_html` wrote."""
    fields = re.search(r'var view = "([^"]*)", libraries = "([^"]*)";', page)
    return tuple(zlib.decompress(base64.b64decode(packed)).decode("utf-8") if packed else ""
                 for packed in fields.groups())


def _rounded(values, decimals: int = 3):
    """``values`` to a few decimals, in float64 (so that they print short): the page stores every
    number as JSON text, and float32 values print with 17 digits (a view would be 2.5x larger)."""
    import torch

    return torch.round(values.detach().double(), decimals=decimals)


_libraries_sent_in = {"cell": None}  # the execution count of the cell whose first view carried them


def _show(html) -> None:
    """Display a view, with the libraries only in the first view of each cell: a cell's outputs
    are replaced together, so every cell's views still draw when the notebook is reopened."""
    from IPython import get_ipython
    from IPython.display import HTML, display

    shell = get_ipython()
    cell = shell.execution_count if shell is not None else None
    first = cell is None or _libraries_sent_in["cell"] != cell
    _libraries_sent_in["cell"] = cell
    display(HTML(offline_html(html.data, with_libraries=first)))


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
    ``_rounded``), the queries and keys to 2 (they are drawn as colours): the page of one neuron
    view shrinks from about 6 MB to about 0.5 MB deflated."""
    for layer in output[-1]:
        for name, decimals in (("attn", 3), ("queries", 2), ("keys", 2)):
            layer[name] = _rounded(layer[name], decimals)
    return output


def neuron_view(viewer, tokenizer, sentence_a, sentence_b=None, layer=0, head=0, **options):
    """bertviz's ``neuron_view`` (one head's queries, keys and their products), drawn offline.
    ``viewer`` comes from :func:`bertviz_bert`; the tokenizer is the model's own."""
    from bertviz.neuron_view import show

    return _show(show(viewer, "bert", tokenizer, sentence_a, sentence_b, layer=layer, head=head,
                      html_action="return", **options))
