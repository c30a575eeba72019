"""The optional Performer part: the plumbing around the student's ``performer_attention`` (a
random projection, masks split into padding and causality, an attention module that calls it, and
the swap into a trained model's layers), and the memory probe its check uses."""

from __future__ import annotations

import torch

from ..memory import largest_intermediate

__all__ = ["random_projection", "split_mask", "PerformerAttention", "use_performer_attention", "largest_intermediate"]

# ---------------------------------------------------------------------------------------------
# The optional Performer part: plumbing around the student's performer_attention.
# ---------------------------------------------------------------------------------------------
def random_projection(num_features: int, d: int, seed: int = 0) -> torch.Tensor:
    """``(num_features, d)`` FAVOR+ projection: blocks of ``d`` orthogonal directions (QR of a
    Gaussian matrix), each row rescaled to the length of a Gaussian vector, so every row is still
    distributed as N(0, I) but the rows of a block do not repeat each other's information."""
    g = torch.Generator().manual_seed(seed)
    blocks = [torch.linalg.qr(torch.randn(d, d, generator=g))[0].T for _ in range(-(-num_features // d))]
    lengths = torch.randn(num_features, d, generator=g).norm(dim=1)
    return torch.cat(blocks)[:num_features] * lengths[:, None]


def split_mask(mask: torch.Tensor | None, Tq: int, Tk: int) -> tuple[torch.Tensor | None, bool]:
    """A layer's boolean mask ``(Tq, Tk)`` or ``(B, Tq, Tk)`` as ``(key_mask (B, Tk), causal)``.

    Linear attention cannot apply an arbitrary mask, only drop keys and hide later positions; a
    mask that is not of that form is refused rather than silently approximated."""
    if mask is None:
        return None, False
    if mask.dim() == 2:
        mask = mask[None]
    key_mask = mask.any(dim=1)  # (B, Tk): a key some query may see
    causal = Tq == Tk and Tq > 1 and not mask.triu(1).any()
    rebuilt = key_mask[:, None, :].expand(-1, Tq, -1)
    if causal:
        rebuilt = rebuilt & torch.ones(Tq, Tk, dtype=torch.bool, device=mask.device).tril()
    if not torch.equal(rebuilt, mask.expand_as(rebuilt)):
        raise ValueError("Performer attention supports masks that drop keys (padding) and hide later positions "
                         "(causal), nothing else: this mask is neither")
    return key_mask, causal


class PerformerAttention(torch.nn.Module):
    """Multi-head attention as in Part 3 (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``), whose
    core is ``performer_attention(q, k, v, projection, key_mask, causal)`` with a fixed random
    projection of ``num_features`` rows per head. Returns ``(out, None)``: it has no weights."""

    def __init__(self, performer_attention, d_model: int, num_heads: int, num_features: int, seed: int = 0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
        self.attend, self.num_heads, self.d_head = performer_attention, num_heads, d_model // num_heads
        self.q_proj, self.k_proj = torch.nn.Linear(d_model, d_model), torch.nn.Linear(d_model, d_model)
        self.v_proj, self.out_proj = torch.nn.Linear(d_model, d_model), torch.nn.Linear(d_model, d_model)
        self.register_buffer("projection", random_projection(num_features, self.d_head, seed))

    def forward(self, query, key, value, mask=None, cache=None):
        if isinstance(cache, dict):
            raise ValueError("this Performer model has no key/value cache: decode it with use_cache=False")
        B, Tq, Tk = query.shape[0], query.shape[1], key.shape[1]
        key_mask, causal = split_mask(mask, Tq, Tk)

        def heads(x):  # (B, T, d_model) -> (B, heads, T, d_head)
            return x.view(B, x.shape[1], self.num_heads, self.d_head).transpose(1, 2)

        out = self.attend(heads(self.q_proj(query)), heads(self.k_proj(key)), heads(self.v_proj(value)),
                          self.projection, key_mask=None if key_mask is None else key_mask[:, None, :], causal=causal)
        if not isinstance(out, torch.Tensor) or out.shape != (B, self.num_heads, Tq, self.d_head):
            raise ValueError(f"performer_attention must return a tensor of shape (B, heads, Tq, d_head) = "
                             f"{(B, self.num_heads, Tq, self.d_head)}, got {getattr(out, 'shape', type(out).__name__)}")
        return self.out_proj(out.transpose(1, 2).reshape(B, Tq, -1)), None


def use_performer_attention(model: torch.nn.Module, attention_class: type, performer_attention, *,
                            num_features: int = 64, seed: int = 0) -> int:
    """Replace every ``attention_class`` module inside ``model`` by a fresh ``PerformerAttention``
    of the same size (each with its own projection); returns how many were replaced."""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, attention_class):
                d_model, num_heads = child.q_proj.in_features, getattr(child, "num_heads", None)
                if num_heads is None:
                    raise ValueError(f"{attention_class.__name__} needs a num_heads attribute to be replaced")
                setattr(parent, name, PerformerAttention(performer_attention, d_model, num_heads, num_features,
                                                         seed=seed + replaced))
                replaced += 1
    if not replaced:
        raise ValueError(f"no {attention_class.__name__} module found in the model")
    return replaced
