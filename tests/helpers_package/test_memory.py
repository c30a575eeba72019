"""helpers.memory.largest_intermediate: what the kernel-attention and Performer tests measure with."""

import subprocess
import sys

import pytest
import torch

from helpers.memory import largest_intermediate

pytestmark = pytest.mark.beside_grading  # no sandbox, no look at others' processes (conftest)


def quadratic(Q, K, V):
    return torch.softmax(torch.einsum("nld,nsd->nls", Q, K), dim=-1) @ V


def linear(Q, K, V):
    Q, K = torch.nn.functional.elu(Q) + 1, torch.nn.functional.elu(K) + 1
    kv = torch.einsum("nsd,nsm->ndm", K, V)
    return torch.einsum("nld,ndm->nlm", Q, kv) / (Q @ K.sum(1).unsqueeze(-1))


def test_it_sees_the_matrix_inside_an_einsum_and_not_in_linear_attention():
    g = torch.Generator().manual_seed(0)
    Q, K, V = torch.randn(2, 40, 3, generator=g), torch.randn(2, 30, 3, generator=g), torch.randn(2, 30, 5, generator=g)
    out, numel, shape = largest_intermediate(quadratic, Q, K, V)
    assert (numel, shape) == (2 * 40 * 30, (2, 40, 30))
    torch.testing.assert_close(out, quadratic(Q, K, V))
    _, numel, _ = largest_intermediate(linear, Q, K, V)
    assert numel < 2 * 40 * 30 / 4


def test_watching_does_not_import_torch_dynamo():
    """torch wraps a dispatch mode to keep torch.compile out of it, and that wrapper imports
    torch._dynamo on first use: 1.1 s of every kernel_attention grading kernel until the watcher
    opted out."""
    probe = ("import sys, torch\n"
             "from helpers.memory import largest_intermediate\n"
             "largest_intermediate(lambda x: torch.nn.functional.elu(x) @ x.T, torch.ones(4, 3))\n"
             "print('torch._dynamo' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
