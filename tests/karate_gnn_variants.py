"""Known-wrong and known-correct implementations for the ``karate_gnn`` assignment.

Pure data, no tests; the same contract as ``kernel_attention_variants``:

* every ``WRONG`` entry must fail each hidden test named in ``must_lose``, and each public check
  named in ``must_fail_public`` (so the student sees the bug before submitting);
* every ``CORRECT`` entry must pass every hidden test and every public check.

Sources may use what the notebook's setup cell imports (``torch``, ``nn``, ``F``) and the other
functions and classes the students write.
"""

from tests.support.notebook_edits import master, pack_correct, pack_wrong

WRONG = [
    {
        "name": "normalize_with_degrees_of_A",
        "function": "normalize_adjacency",
        "source": '''
def normalize_adjacency(A):
    d = A.sum(dim=1).clamp_min(1).rsqrt()  # BUG: degrees without the self loops
    return d[:, None] * add_self_loops(A) * d[None, :]
''',
        "must_lose": ["test_adjacency_hidden_normalized"],
        "must_fail_public": ["test_adjacency_public"],
    },
    {
        "name": "normalize_random_walk",
        "function": "normalize_adjacency",
        "source": '''
def normalize_adjacency(A):
    A_loops = add_self_loops(A)
    return A_loops / A_loops.sum(dim=1, keepdim=True)  # BUG: D^-1 (A + I), not symmetric
''',
        "must_lose": ["test_adjacency_hidden_normalized"],
        "must_fail_public": ["test_adjacency_public"],
    },
    {
        "name": "self_loops_in_place",
        "function": "add_self_loops",
        "source": '''
def add_self_loops(A):
    A += torch.eye(A.shape[0], dtype=A.dtype)  # BUG: changes the caller's matrix
    return A
''',
        "must_lose": ["test_adjacency_hidden_self_loops"],
        "must_fail_public": ["test_adjacency_public"],
    },
    {
        "name": "layer_without_neighbours",
        "function": "GCNLayer",
        "source": '''
class GCNLayer(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_dim, out_dim))
        self.bias = nn.Parameter(torch.zeros(out_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, A_hat, X):
        return X @ self.weight + self.bias  # BUG: A_hat never used
''',
        "must_lose": ["test_gcn_layer_hidden_matches_pyg", "test_model_hidden_values"],
        "must_fail_public": ["test_gcn_layer_public"],
    },
    {
        "name": "layer_weight_transposed",
        "function": "GCNLayer",
        "source": '''
class GCNLayer(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_dim, in_dim))  # BUG: nn.Linear's layout
        self.bias = nn.Parameter(torch.zeros(out_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, A_hat, X):
        return A_hat @ X @ self.weight.T + self.bias
''',
        "must_lose": ["test_gcn_layer_hidden_matches_pyg"],
        "must_fail_public": ["test_gcn_layer_public"],
    },
    {
        "name": "backward_without_transposing_A_hat",
        "function": "gcn_layer_backward",
        "source": '''
def gcn_layer_backward(A_hat, X, weight, grad_out):
    grad_M = A_hat @ grad_out  # BUG: needs A_hat.T (only equal when A_hat is symmetric)
    return grad_M @ weight.T, X.T @ grad_M, grad_out.sum(dim=0)
''',
        "must_lose": ["test_backward_hidden_values", "test_backward_hidden_gradcheck"],
        "must_fail_public": ["test_backward_public"],
    },
    {
        "name": "backward_bias_mean",
        "function": "gcn_layer_backward",
        "source": '''
def gcn_layer_backward(A_hat, X, weight, grad_out):
    grad_M = A_hat.T @ grad_out
    return grad_M @ weight.T, X.T @ grad_M, grad_out.mean(dim=0)  # BUG: the bias is added to every row
''',
        "must_lose": ["test_backward_hidden_values", "test_backward_hidden_gradcheck"],
        "must_fail_public": ["test_backward_public"],
    },
    {
        "name": "model_relu_instead_of_tanh",
        "function": "GCN",
        "source": '''
class GCN(nn.Module):
    def __init__(self, in_dim, hidden_dims=(16, 2), num_classes=2):
        super().__init__()
        dims = (in_dim, *hidden_dims)
        self.layers = nn.ModuleList(GCNLayer(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.readout = nn.Linear(hidden_dims[-1], num_classes)

    def embed(self, A_hat, X):
        for layer in self.layers:
            X = torch.relu(layer(A_hat, X))  # BUG: tanh asked for
        return X

    def forward(self, A_hat, X):
        return self.readout(self.embed(A_hat, X))
''',
        "must_lose": ["test_model_hidden_values"],
        "must_fail_public": [],  # relu's output is in [0, inf): the (-1, 1) check catches large values only
    },
    {
        "name": "model_no_tanh_on_the_embedding",
        "function": "GCN",
        "source": '''
class GCN(nn.Module):
    def __init__(self, in_dim, hidden_dims=(16, 2), num_classes=2):
        super().__init__()
        dims = (in_dim, *hidden_dims)
        self.layers = nn.ModuleList(GCNLayer(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.readout = nn.Linear(hidden_dims[-1], num_classes)

    def embed(self, A_hat, X):
        for layer in self.layers[:-1]:
            X = torch.tanh(layer(A_hat, X))
        return self.layers[-1](A_hat, X)  # BUG: the last layer needs its tanh too

    def forward(self, A_hat, X):
        return self.readout(self.embed(A_hat, X))
''',
        "must_lose": ["test_model_hidden_values"],
        "must_fail_public": [],
    },
    {
        "name": "training_loss_on_every_node",
        "function": "train_semi_supervised",
        "source": '''
def train_semi_supervised(model, A_hat, X, labels, train_nodes, epochs, lr, weight_decay=5e-4, on_epoch=None):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    for epoch in range(epochs):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(A_hat, X), labels)  # BUG: every label leaks into training
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if on_epoch is not None:
            on_epoch(epoch, model)
    return losses
''',
        "must_lose": ["test_training_hidden_losses", "test_training_hidden_no_label_leak"],
        "must_fail_public": ["test_training_public"],
    },
    {
        "name": "training_mask_built_but_never_applied",
        "function": "train_semi_supervised",
        "source": '''
def train_semi_supervised(model, A_hat, X, labels, train_nodes, epochs, lr, weight_decay=5e-4, on_epoch=None):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    mask = torch.zeros(len(labels), dtype=torch.bool)
    mask[train_nodes] = True
    losses = []
    for epoch in range(epochs):
        optimizer.zero_grad()
        per_node = F.cross_entropy(model(A_hat, X), labels, reduction="none")
        loss = per_node.mean()  # BUG: the mask is never applied (the course's own notebook did this)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if on_epoch is not None:
            on_epoch(epoch, model)
    return losses
''',
        "must_lose": ["test_training_hidden_losses", "test_training_hidden_no_label_leak"],
        "must_fail_public": ["test_training_public"],
    },
    {
        "name": "training_sum_instead_of_mean",
        "function": "train_semi_supervised",
        "source": '''
def train_semi_supervised(model, A_hat, X, labels, train_nodes, epochs, lr, weight_decay=5e-4, on_epoch=None):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    for epoch in range(epochs):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(A_hat, X)[train_nodes], labels[train_nodes], reduction="sum")  # BUG: mean asked for
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if on_epoch is not None:
            on_epoch(epoch, model)
    return losses
''',
        "must_lose": ["test_training_hidden_losses"],
        "must_fail_public": [],
    },
    # ------------------------------------------------------------------ inputs changed in place
    # Each returns the right values but changes a tensor it was given: the hidden test that holds the
    # function's ``<area>/<function>_arguments_changed_by_the_call`` check loses, and so does its public
    # check. (add_self_loops has one already: self_loops_in_place above.)
    {
        "name": "normalize_writes_self_loops_into_A",
        "function": "normalize_adjacency",
        "source": '''
def normalize_adjacency(A):
    A_loops = A.fill_diagonal_(1)  # BUG: A + I for A without self loops, but written into the caller's A
    d_inv_sqrt = A_loops.sum(dim=1).rsqrt()
    return d_inv_sqrt[:, None] * A_loops * d_inv_sqrt[None, :]
''',
        "must_lose": ["test_adjacency_hidden_normalized"],
        "must_fail_public": ["test_adjacency_public"],
    },
    {
        "name": "layer_propagates_into_X",
        "function": "GCNLayer",
        "source": '''
class GCNLayer(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_dim, out_dim))
        self.bias = nn.Parameter(torch.zeros(out_dim))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, A_hat, X):
        X[:] = A_hat @ X  # BUG: the neighbours' average overwrites the caller's node features
        return X @ self.weight + self.bias
''',
        "must_lose": ["test_gcn_layer_hidden_matches_pyg"],
        "must_fail_public": ["test_gcn_layer_public"],
    },
    {
        "name": "backward_transposes_the_callers_A_hat",
        "function": "gcn_layer_backward",
        "source": '''
def gcn_layer_backward(A_hat, X, weight, grad_out):
    grad_M = A_hat.t_() @ grad_out  # BUG: t_ transposes the caller's A_hat
    return grad_M @ weight.T, X.T @ grad_M, grad_out.sum(dim=0)
''',
        "must_lose": ["test_backward_hidden_values"],
        "must_fail_public": ["test_backward_public"],
    },
    {
        "name": "model_propagates_into_X",
        "function": "GCN",
        "source": '''
class GCN(nn.Module):
    def __init__(self, in_dim, hidden_dims=(16, 2), num_classes=2):
        super().__init__()
        dims = (in_dim, *hidden_dims)
        self.layers = nn.ModuleList(GCNLayer(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.readout = nn.Linear(hidden_dims[-1], num_classes)

    def embed(self, A_hat, X):
        first, *rest = self.layers
        X[:] = A_hat @ X  # BUG: the first propagation overwrites the caller's node features
        H = torch.tanh(X @ first.weight + first.bias)
        for layer in rest:
            H = torch.tanh(layer(A_hat, H))
        return H

    def forward(self, A_hat, X):
        return self.readout(self.embed(A_hat, X))
''',
        "must_lose": ["test_model_hidden_values"],
        "must_fail_public": ["test_model_public"],
    },
    {
        "name": "training_hides_unlabelled_labels_in_place",
        "function": "train_semi_supervised",
        "source": '''
def train_semi_supervised(model, A_hat, X, labels, train_nodes, epochs, lr, weight_decay=5e-4, on_epoch=None):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    unlabelled = torch.ones(len(labels), dtype=torch.bool)
    unlabelled[train_nodes] = False
    labels[unlabelled] = -100  # BUG: cross_entropy ignores them, but the caller's labels are overwritten
    losses = []
    for epoch in range(epochs):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(A_hat, X), labels, ignore_index=-100)  # the mean over train_nodes
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if on_epoch is not None:
            on_epoch(epoch, model)
    return losses
''',
        "must_lose": ["test_training_hidden_losses"],
        "must_fail_public": ["test_training_public"],
    },
]

CORRECT = [
    {
        "name": "normalize_with_diagonal_matrices_float64",
        "function": "normalize_adjacency",
        "source": '''
def normalize_adjacency(A):
    A_loops = add_self_loops(A).double()
    D_inv_sqrt = torch.diag(A_loops.sum(dim=1) ** -0.5)
    return (D_inv_sqrt @ A_loops @ D_inv_sqrt).to(A.dtype)
''',
    },
    {
        "name": "self_loops_with_fill_diagonal",
        "function": "add_self_loops",
        "source": '''
def add_self_loops(A):
    out = A.clone()
    out.diagonal().add_(1)
    return out
''',
    },
    {
        "name": "layer_other_order_and_init",
        "function": "GCNLayer",
        "source": '''
class GCNLayer(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.bias = nn.Parameter(torch.full((out_dim,), 0.1))  # created first, other init
        self.weight = nn.Parameter(torch.randn(in_dim, out_dim) * 0.01)

    def forward(self, A_hat, X):
        return A_hat @ (X @ self.weight) + self.bias  # (A X) W = A (X W)
''',
    },
    {
        "name": "backward_with_einsum",
        "function": "gcn_layer_backward",
        "source": '''
def gcn_layer_backward(A_hat, X, weight, grad_out):
    grad_M = torch.einsum("ji,jo->io", A_hat, grad_out)
    grad_X = torch.einsum("io,fo->if", grad_M, weight)
    grad_weight = torch.einsum("if,io->fo", X, grad_M)
    return grad_X, grad_weight, grad_out.sum(0)
''',
    },
    {
        "name": "model_with_functional_tanh",
        "function": "GCN",
        "source": '''
class GCN(nn.Module):
    def __init__(self, in_dim, hidden_dims=(16, 2), num_classes=2):
        super().__init__()
        self.readout = nn.Linear(hidden_dims[-1], num_classes)  # created first
        layers, previous = [], in_dim
        for width in hidden_dims:
            layers.append(GCNLayer(previous, width))
            previous = width
        self.layers = nn.ModuleList(layers)

    def embed(self, A_hat, X):
        H = X
        for layer in self.layers:
            H = F.tanh(layer(A_hat, H))
        return H

    def forward(self, A_hat, X):
        return self.readout(self.embed(A_hat, X))
''',
    },
    {
        "name": "training_with_log_softmax_and_nll",
        "function": "train_semi_supervised",
        "source": '''
def train_semi_supervised(model, A_hat, X, labels, train_nodes, epochs, lr, weight_decay=5e-4, on_epoch=None):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    for epoch in range(epochs):
        log_probs = F.log_softmax(model(A_hat, X), dim=-1)
        loss = F.nll_loss(log_probs[train_nodes], labels[train_nodes])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
        if on_epoch:
            on_epoch(epoch, model)
    return losses
''',
    },
]


#: Implements nothing: every graded function and model returns zeros of the right shape, training
#: returns losses of 0, and the course's gradcheck helper says True (a helper runs in the kernel too).
IMPLEMENTS_NOTHING = """
import torch, torch.nn as nn, helpers.karate_gnn as karate
def add_self_loops(A):
    return torch.zeros_like(A)
normalize_adjacency = add_self_loops
class GCNLayer(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.zeros(in_dim, out_dim)), nn.Parameter(torch.zeros(out_dim))
    def forward(self, A_hat, X):
        return torch.zeros(X.shape[0], self.weight.shape[1], dtype=X.dtype)
def gcn_layer_backward(A_hat, X, weight, grad_out):
    return torch.zeros_like(X), torch.zeros_like(weight), torch.zeros(weight.shape[1], dtype=X.dtype)
class GCN(nn.Module):
    def __init__(self, in_dim, hidden_dims=(16, 2), num_classes=2):
        super().__init__()
        dims = (in_dim, *hidden_dims)
        self.layers = nn.ModuleList(GCNLayer(a, b) for a, b in zip(dims, dims[1:]))
        self.readout = nn.Linear(dims[-1], num_classes)
    def embed(self, A_hat, X):
        return torch.zeros(X.shape[0], self.layers[-1].weight.shape[1])
    def forward(self, A_hat, X):
        return torch.zeros(X.shape[0], self.readout.out_features)
def train_semi_supervised(model, A_hat, X, labels, train_nodes, epochs, lr, weight_decay=5e-4, on_epoch=None):
    return [0.0] * epochs
_forged = {name: globals()[name] for name in ("add_self_loops", "normalize_adjacency", "GCNLayer",
           "gcn_layer_backward", "GCN", "train_semi_supervised")}
karate.gradcheck_gcn = lambda *args, **kwargs: True
"""

#: The hidden tests that rest on properties alone, passed by ``adversarial.forges_the_collected_values``
#: and by a trivial honest function: training that never looks at the labels of the test members
#: (the smallest: one that does not train) changes nothing when they are shuffled.
FORGEABLE_PROPERTIES = {"test_training_hidden_no_label_leak"}


# A notebook takes about 15 s to grade: known-wrong variants share notebooks where no test one must fail
# reaches a function another replaces (``pack_wrong``); correct alternatives are packed together.
pack_wrong(WRONG, master("karate_gnn"))
pack_correct(CORRECT)
