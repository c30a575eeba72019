"""The offline models: the bundled BERT-style and GPT-style models load with no network and
return attentions; an untrained BERT is a seeded fresh initialization; the SmolLM2 conversion is
cached; any other name goes through ``from_pretrained`` (tested on folders saved here)."""

import os
import shutil

import pytest
import torch

from helpers import models

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # any attempt to reach the hub fails instead of downloading


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(models.CACHE_ENV, str(folder))
        yield folder


def test_bundled_bert_returns_attention_for_sentence_pairs():
    model, tokenizer = models.load_bert()
    assert model.config.num_hidden_layers == 6 and model.config.num_attention_heads == 12
    batch = tokenizer(["I wanted to have a party", "I am happy"], ["I bought a cake for it.", "I am not sad"],
                      return_tensors="pt", padding=True)
    with torch.no_grad():
        attentions = model(**batch).attentions
    assert len(attentions) == 6 and attentions[0].shape == (2, 12, *batch["input_ids"].shape[1:] * 2)
    assert torch.allclose(attentions[3].sum(-1), torch.ones(2, 12, batch["input_ids"].shape[1]), atol=1e-5)
    assert (attentions[0][1, :, :, -1] < 1e-6).all()  # the shorter pair's padding gets no attention


def test_each_load_has_a_tokenizer_of_its_own():
    """The bundled models' tokenizers are read once per process and copied: a change to one must not
    reach the next."""
    _, first = models.load_bert()
    first.padding_side, first.model_max_length = "left", 7
    first.add_special_tokens({"additional_special_tokens": ["[ONLY-MINE]"]})
    _, second = models.load_bert()
    assert (second.padding_side, second.model_max_length) == ("right", 512)
    assert "[ONLY-MINE]" not in second.get_vocab() and len(second) == len(first) - 1
    assert second("I am happy")["input_ids"] == models.load_bert()[1]("I am happy")["input_ids"]


def test_untrained_bert_is_a_seeded_fresh_initialization():
    trained, _ = models.load_bert()
    fresh, _ = models.load_bert(pretrained=False, seed=3)
    again, _ = models.load_bert(pretrained=False, seed=3)
    weight = lambda m: m.encoder.layer[0].attention.self.query.weight
    assert not torch.allclose(weight(fresh), weight(trained))
    assert torch.equal(weight(fresh), weight(again))
    assert fresh.config.num_hidden_layers == trained.config.num_hidden_layers


def test_bundled_gpt_is_converted_once_and_is_causal(cache, capsys):
    model, tokenizer = models.load_gpt()
    assert "Converting the bundled SmolLM2" in capsys.readouterr().out
    folder = cache / "smollm2-135m-instruct-fp32"
    assert (folder / "model.safetensors").exists() and not list(cache.glob("*.partial"))
    assert next(model.parameters()).dtype == torch.float32 and model.config.num_hidden_layers == 30
    batch = tokenizer(["The dog ran", "The dog sitting in the car"], return_tensors="pt", padding=True)
    with torch.no_grad():
        attentions = model(**batch).attentions
    assert len(attentions) == 30
    upper = torch.triu(torch.ones(attentions[0].shape[-2:], dtype=torch.bool), diagonal=1)
    assert attentions[5][..., upper].abs().max() < 1e-6  # causal: nothing from later tokens
    models.load_gpt()
    said = capsys.readouterr()
    assert "Converting" not in said.out  # the cached copy is used
    assert "Loading weights" not in said.err and "generation flags" not in said.err + said.out  # loads quietly
    assert oct((folder / "model.safetensors").stat().st_mode & 0o777) == oct(0o644)  # grading sandboxes read it


def test_a_read_only_cache_converts_into_a_temporary_folder(tmp_path, monkeypatch, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    monkeypatch.setenv(models.CACHE_ENV, str(locked / "cache"))
    if os.access(locked, os.W_OK):  # root writes anywhere: make the probe fail the way it would for a user
        def refuse(*args, **kwargs):
            raise PermissionError("read-only")

        monkeypatch.setattr(models.Path, "touch", refuse)
    folder = models.prepare_bundled_gpt()
    assert not folder.is_relative_to(locked) and (folder / "model.safetensors").exists()
    assert "cannot be written" in capsys.readouterr().out
    shutil.rmtree(folder.parent)


def test_other_names_go_through_from_pretrained(tmp_path):
    from transformers import BertConfig, BertModel, BertTokenizerFast, GPT2Config, GPT2LMHeadModel

    vocab = models.bundled_model_path("minilm") / "vocab.txt"
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(tmp_path / "tiny-bert")
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64)).save_pretrained(tmp_path / "tiny-bert")
    model, tokenizer = models.load_bert(str(tmp_path / "tiny-bert"))
    with torch.no_grad():
        assert model(**tokenizer("I am happy", return_tensors="pt")).attentions[1].shape[1] == 4
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(tmp_path / "tiny-gpt")
    GPT2LMHeadModel(GPT2Config(vocab_size=30522, n_embd=32, n_layer=2, n_head=4)).save_pretrained(tmp_path / "tiny-gpt")
    model, tokenizer = models.load_gpt(str(tmp_path / "tiny-gpt"))
    with torch.no_grad():
        assert len(model(**tokenizer("The dog ran", return_tensors="pt")).attentions) == 2


def test_unknown_bundled_model_is_named():
    with pytest.raises(ValueError, match="minilm"):
        models.bundled_model_path("bert-large")
