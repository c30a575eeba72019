"""Known-wrong and known-correct implementations for the ``autoencoders`` assignment.

Pure data, no tests; the same contract as ``kernel_attention_variants``:

* every ``WRONG`` entry must fail each hidden test named in ``must_lose``, and each public check
  named in ``must_fail_public`` (so the student sees the bug before submitting);
* every ``CORRECT`` entry must pass every hidden test and every public check.

An entry replaces one definition (``function`` and ``source``) or several (``edits``: a list of
``(function, source)`` pairs). Variants share graded notebooks where their bugs cannot hide each
other's (``pack_wrong``, ``pack_correct``, at the end). Sources may use what the notebook's setup
cell imports (``torch``, ``nn``, ``F``) and the other functions and classes the students write.
"""

from tests.support.notebook_edits import master, pack_correct, pack_wrong

_AUTOENCODER_METHODS = '''
    def encode(self, x):
        return self.encoder(x)

    def decode(self, z):
        return self.decoder(z)

    def forward(self, x):
        return self.decode(self.encode(x))
'''

WRONG = [
    {
        "name": "activation_on_the_code",
        "function": "Autoencoder",
        "source": '''
class Autoencoder(nn.Module):
    def __init__(self, input_dim, hidden_dims, bottleneck, activation=None):
        super().__init__()
        dims = [input_dim, *hidden_dims, bottleneck]
        enc, dec = [], []
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            enc += [nn.Linear(d_in, d_out)] + ([activation()] if activation else [])  # BUG: also after the code
        back = dims[::-1]
        for i, (d_in, d_out) in enumerate(zip(back[:-1], back[1:])):
            dec += [nn.Linear(d_in, d_out)] + ([activation()] if activation and i < len(back) - 2 else [])
        self.encoder, self.decoder = nn.Sequential(*enc), nn.Sequential(*dec)
''' + _AUTOENCODER_METHODS,
        "must_lose": ["test_autoencoder_hidden_values"],
        "must_fail_public": ["test_autoencoder_public"],
    },
    {
        "name": "decoder_not_mirrored",
        "function": "Autoencoder",
        "source": '''
class Autoencoder(nn.Module):
    def __init__(self, input_dim, hidden_dims, bottleneck, activation=None):
        super().__init__()
        def stack(dims):
            layers = []
            for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
                layers.append(nn.Linear(d_in, d_out))
                if activation is not None and i < len(dims) - 2:
                    layers.append(activation())
            return nn.Sequential(*layers)
        self.encoder = stack([input_dim, *hidden_dims, bottleneck])
        self.decoder = stack([bottleneck, *hidden_dims, input_dim])  # BUG: hidden widths in the encoder's order
''' + _AUTOENCODER_METHODS,
        "must_lose": ["test_autoencoder_hidden_values"],
        "must_fail_public": ["test_autoencoder_public"],
    },
    {
        "name": "always_relu",
        "function": "Autoencoder",
        "source": '''
class Autoencoder(nn.Module):
    def __init__(self, input_dim, hidden_dims, bottleneck, activation=None):
        super().__init__()
        def stack(dims):
            layers = []
            for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
                layers.append(nn.Linear(d_in, d_out))
                if activation is not None and i < len(dims) - 2:
                    layers.append(nn.ReLU())  # BUG: ignores which activation was asked for
            return nn.Sequential(*layers)
        dims = [input_dim, *hidden_dims, bottleneck]
        self.encoder, self.decoder = stack(dims), stack(dims[::-1])
''' + _AUTOENCODER_METHODS,
        "must_lose": ["test_autoencoder_hidden_values"],
        "must_fail_public": ["test_autoencoder_public"],
    },
    {
        "name": "loss_summed_over_features",
        "function": "reconstruction_loss",
        "source": '''
def reconstruction_loss(x_hat, x):
    return ((x_hat - x) ** 2).sum(dim=-1).mean()  # BUG: sum over features, mean over examples only
''',
        "must_lose": ["test_autoencoder_hidden_shallow_and_loss", "test_training_step_hidden_vanilla"],
        "must_fail_public": ["test_autoencoder_public"],
    },
    {
        "name": "noise_scaled_by_variance",
        "function": "add_gaussian_noise",
        "source": '''
def add_gaussian_noise(x, std, generator=None):
    return x + std ** 2 * torch.randn(x.shape, generator=generator, dtype=x.dtype)  # BUG: std^2 instead of std
''',
        "must_lose": ["test_corruptions_hidden_noise", "test_training_step_hidden_denoising"],
        "must_fail_public": ["test_corruptions_public"],
    },
    {
        "name": "noise_from_the_global_seed",
        "function": "add_gaussian_noise",
        "source": '''
def add_gaussian_noise(x, std, generator=None):
    return x + std * torch.randn_like(x)  # BUG: the generator is ignored, so runs cannot be reproduced
''',
        "must_lose": ["test_corruptions_hidden_noise"],
        "must_fail_public": ["test_corruptions_public"],
    },
    {
        "name": "mask_true_where_kept",
        "function": "random_mask",
        "source": '''
def random_mask(x, mask_prob, generator=None):
    keep = torch.rand(x.shape, generator=generator) >= mask_prob
    return x * keep, keep  # BUG: the mask marks the kept entries
''',
        "must_lose": ["test_corruptions_hidden_mask"],
        "must_fail_public": ["test_corruptions_public"],
    },
    {
        "name": "mask_whole_examples",
        "function": "random_mask",
        "source": '''
def random_mask(x, mask_prob, generator=None):
    rows = torch.rand(x.shape[0], 1, generator=generator) < mask_prob  # BUG: one draw per example
    mask = rows.expand_as(x).clone()
    return x.masked_fill(mask, 0.0), mask
''',
        "must_lose": ["test_corruptions_hidden_mask"],
        "must_fail_public": ["test_corruptions_public"],
    },
    {
        "name": "masked_loss_over_all_entries",
        "function": "masked_reconstruction_loss",
        "source": '''
def masked_reconstruction_loss(x_hat, x, mask):
    return ((x_hat - x) ** 2).mean()  # BUG: the course's old version: counts the visible entries too
''',
        "must_lose": ["test_corruptions_hidden_masked_loss", "test_training_step_hidden_masked"],
        "must_fail_public": ["test_corruptions_public", "test_training_step_public"],
    },
    {
        "name": "masked_loss_per_example",
        "function": "masked_reconstruction_loss",
        "source": '''
def masked_reconstruction_loss(x_hat, x, mask):
    per_example = (((x_hat - x) ** 2) * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1)
    return per_example.mean()  # BUG: every example weighs the same, whatever its number of masked entries
''',
        "must_lose": ["test_corruptions_hidden_masked_loss"],
        "must_fail_public": ["test_corruptions_public"],
    },
    {
        "name": "denoising_against_the_noisy_input",
        "function": "training_step",
        "source": '''
def training_step(model, optimizer, x, variant="vanilla", generator=None, noise_std=0.5, mask_prob=0.5):
    if variant == "vanilla":
        loss = reconstruction_loss(model(x), x)
    elif variant == "denoising":
        noisy = add_gaussian_noise(x, noise_std, generator)
        loss = reconstruction_loss(model(noisy), noisy)  # BUG: the target must be the clean x
    elif variant == "masked":
        x_masked, mask = random_mask(x, mask_prob, generator)
        loss = masked_reconstruction_loss(model(x_masked), x, mask)
    else:
        raise ValueError(variant)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
''',
        "must_lose": ["test_training_step_hidden_denoising"],
        "must_fail_public": ["test_training_step_public"],
    },
    {
        "name": "step_without_zero_grad",
        "function": "training_step",
        "source": '''
def training_step(model, optimizer, x, variant="vanilla", generator=None, noise_std=0.5, mask_prob=0.5):
    if variant == "vanilla":
        loss = reconstruction_loss(model(x), x)
    elif variant == "denoising":
        loss = reconstruction_loss(model(add_gaussian_noise(x, noise_std, generator)), x)
    elif variant == "masked":
        x_masked, mask = random_mask(x, mask_prob, generator)
        loss = masked_reconstruction_loss(model(x_masked), x, mask)
    else:
        raise ValueError(variant)
    loss.backward()  # BUG: gradients of earlier batches are still there
    optimizer.step()
    return loss.item()
''',
        "must_lose": ["test_training_step_hidden_vanilla", "test_training_step_hidden_denoising",
                      "test_training_step_hidden_masked"],
        "must_fail_public": ["test_training_step_public"],
    },
    {
        "name": "probe_uses_every_label",
        "function": "linear_probe_accuracy",
        "source": '''
def linear_probe_accuracy(encoder, train, test, num_labels=None, generator=None):
    from sklearn.linear_model import LogisticRegression
    with torch.no_grad():
        F_train, F_test = encoder(train[0]).numpy(), encoder(test[0]).numpy()
    classifier = LogisticRegression(max_iter=1000).fit(F_train, train[1].numpy())  # BUG: num_labels ignored
    return float(classifier.score(F_test, test[1].numpy()))
''',
        "must_lose": ["test_probe_hidden_properties"],
        "must_fail_public": ["test_probe_and_pca_public"],
    },
    {
        "name": "probe_trains_the_encoder",
        "function": "linear_probe_accuracy",
        "source": '''
def linear_probe_accuracy(encoder, train, test, num_labels=None, generator=None):
    X_train, y_train = train[0][:num_labels], train[1][:num_labels]
    num_classes = int(max(y_train.max(), test[1].max())) + 1
    classifier = nn.Linear(encoder(X_train[:1]).shape[1], num_classes)
    params = list(classifier.parameters())
    if isinstance(encoder, nn.Module):
        params += list(encoder.parameters())  # BUG: fine-tuning, not a probe
    optimizer = torch.optim.Adam(params, lr=0.05)
    for _ in range(200):
        optimizer.zero_grad()
        F.cross_entropy(classifier(encoder(X_train)), y_train).backward()
        optimizer.step()
    with torch.no_grad():
        return (classifier(encoder(test[0])).argmax(dim=1) == test[1]).float().mean().item()
''',
        "must_lose": ["test_probe_hidden_encoder_frozen"],
        "must_fail_public": ["test_probe_and_pca_public"],
    },
    {
        "name": "pca_without_centring",
        "function": "pca_components",
        "source": '''
def pca_components(X, k):
    _, _, Vh = torch.linalg.svd(X, full_matrices=False)  # BUG: directions of the raw second moment
    return Vh[:k].T
''',
        "must_lose": ["test_pca_hidden_subspace"],
        "must_fail_public": ["test_probe_and_pca_public"],
    },
    {
        "name": "pca_smallest_eigenvalues",
        "function": "pca_components",
        "source": '''
def pca_components(X, k):
    centred = X - X.mean(dim=0)
    _, vectors = torch.linalg.eigh(centred.T @ centred)
    return vectors[:, :k]  # BUG: eigh sorts ascending: these are the k smallest
''',
        "must_lose": ["test_pca_hidden_subspace"],
        "must_fail_public": ["test_probe_and_pca_public"],
    },
    # ------------------------------------------------------------------ arguments changed in place
    # Each returns the right values and changes one of its tensor arguments: the hidden check
    # ``<area>/<function>_arguments_changed_by_the_call`` catches it.
    {
        "name": "forward_writes_the_reconstruction_over_its_input",
        "function": "Autoencoder",
        "source": '''
class Autoencoder(nn.Module):
    def __init__(self, input_dim, hidden_dims, bottleneck, activation=None):
        super().__init__()
        def stack(dims):
            layers = []
            for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
                layers.append(nn.Linear(d_in, d_out))
                if activation is not None and i < len(dims) - 2:
                    layers.append(activation())
            return nn.Sequential(*layers)
        dims = [input_dim, *hidden_dims, bottleneck]
        self.encoder, self.decoder = stack(dims), stack(dims[::-1])

    def encode(self, x):
        return self.encoder(x)

    def decode(self, z):
        return self.decoder(z)

    def forward(self, x):
        x_hat = self.decode(self.encode(x))
        with torch.no_grad():
            x.copy_(x_hat)  # BUG: the reconstruction overwrites the caller's batch
        return x_hat
''',
        "must_lose": ["test_autoencoder_hidden_values"],
        "must_fail_public": ["test_autoencoder_public"],
    },
    {
        "name": "loss_subtracts_in_place",
        "function": "reconstruction_loss",
        "source": '''
def reconstruction_loss(x_hat, x):
    x_hat -= x  # BUG: the caller's x_hat now holds the errors
    return (x_hat ** 2).mean()
''',
        "must_lose": ["test_autoencoder_hidden_shallow_and_loss"],
        "must_fail_public": ["test_autoencoder_public"],
    },
    {
        "name": "noise_added_in_place",
        "function": "add_gaussian_noise",
        "source": '''
def add_gaussian_noise(x, std, generator=None):
    x += std * torch.randn(x.shape, generator=generator, dtype=x.dtype)  # BUG: the caller's x gets the noise
    return x
''',
        "must_lose": ["test_corruptions_hidden_noise"],
        "must_fail_public": ["test_corruptions_public"],
    },
    {
        "name": "mask_filled_in_place",
        "function": "random_mask",
        "source": '''
def random_mask(x, mask_prob, generator=None):
    mask = torch.rand(x.shape, generator=generator) < mask_prob
    return x.masked_fill_(mask, 0.0), mask  # BUG: masked_fill_ zeroes the caller's x
''',
        "must_lose": ["test_corruptions_hidden_mask"],
        "must_fail_public": ["test_corruptions_public"],
    },
    {
        "name": "masked_loss_subtracts_in_place",
        "function": "masked_reconstruction_loss",
        "source": '''
def masked_reconstruction_loss(x_hat, x, mask):
    x_hat.sub_(x)  # BUG: the caller's x_hat now holds the errors
    return (x_hat ** 2)[mask].mean()
''',
        "must_lose": ["test_corruptions_hidden_masked_loss"],
        "must_fail_public": ["test_corruptions_public"],
    },
    {
        "name": "step_masks_the_batch_in_place",
        "function": "training_step",
        "source": '''
def training_step(model, optimizer, x, variant="vanilla", generator=None, noise_std=0.5, mask_prob=0.5):
    if variant == "vanilla":
        loss = reconstruction_loss(model(x), x)
    elif variant == "denoising":
        loss = reconstruction_loss(model(add_gaussian_noise(x, noise_std, generator)), x)
    elif variant == "masked":
        target = x.clone()
        _, mask = random_mask(x, mask_prob, generator)
        x.masked_fill_(mask, 0.0)  # BUG: masks the caller's batch itself
        loss = masked_reconstruction_loss(model(x), target, mask)
    else:
        raise ValueError(variant)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
''',
        "must_lose": ["test_training_step_hidden_masked"],
        "must_fail_public": ["test_training_step_public"],
    },
    {
        "name": "probe_standardizes_the_features_in_place",
        "function": "linear_probe_accuracy",
        "source": '''
def linear_probe_accuracy(encoder, train, test, num_labels=None, generator=None):
    X_train, y_train = train
    X_test, y_test = test
    if num_labels is not None:
        X_train, y_train = X_train[:num_labels], y_train[:num_labels]
    with torch.no_grad():
        F_train, F_test = encoder(X_train), encoder(X_test)
        mean = F_train.mean(dim=0)
        scale = (F_train - mean).pow(2).mean().sqrt().clamp_min(1e-12)
        F_train -= mean  # BUG: with encoder = lambda x: x, F_train and F_test are the caller's X
        F_train /= scale
        F_test -= mean
        F_test /= scale
    F_train, F_test = F_train.double(), F_test.double()
    num_classes = int(max(y_train.max(), y_test.max())) + 1
    classifier = nn.Linear(F_train.shape[1], num_classes).double()
    nn.init.zeros_(classifier.weight), nn.init.zeros_(classifier.bias)
    optimizer = torch.optim.LBFGS(classifier.parameters(), max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(classifier(F_train), y_train) + 1e-2 * classifier.weight.pow(2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        return (classifier(F_test).argmax(dim=1) == y_test).double().mean().item()
''',
        "must_lose": ["test_probe_hidden_properties"],
        "must_fail_public": ["test_probe_and_pca_public"],
    },
    {
        "name": "pca_centres_in_place",
        "function": "pca_components",
        "source": '''
def pca_components(X, k):
    X -= X.mean(dim=0)  # BUG: centres the caller's data
    _, _, Vh = torch.linalg.svd(X, full_matrices=False)
    return Vh[:k].T
''',
        "must_lose": ["test_pca_hidden_subspace"],
        "must_fail_public": ["test_probe_and_pca_public"],
    },
]

CORRECT = [
    {
        "name": "autoencoder_from_an_ordered_dict_with_mse_loss",
        "edits": [
            ("Autoencoder", '''
class Autoencoder(nn.Module):
    def __init__(self, input_dim, hidden_dims, bottleneck, activation=None):
        super().__init__()
        from collections import OrderedDict
        widths = [input_dim, *hidden_dims, bottleneck]
        for part, dims in (("encoder", widths), ("decoder", widths[::-1])):
            layers = OrderedDict()
            for i in range(len(dims) - 1):
                layers[f"linear{i}"] = nn.Linear(dims[i], dims[i + 1])
                if activation and i + 1 < len(dims) - 1:
                    layers[f"act{i}"] = activation()
            setattr(self, part, nn.Sequential(layers))

    def encode(self, x):
        return self.encoder(x)

    def decode(self, z):
        return self.decoder(z)

    def forward(self, x):
        z = self.encode(x)
        return self.decode(z)
'''),
            ("reconstruction_loss", '''
def reconstruction_loss(x_hat, x):
    return F.mse_loss(x_hat, x)
'''),
        ],
    },
    {
        "name": "corruptions_with_normal_bernoulli_and_sums",
        "edits": [
            ("add_gaussian_noise", '''
def add_gaussian_noise(x, std, generator=None):
    noise = torch.normal(0.0, 1.0, size=tuple(x.shape), generator=generator, dtype=torch.float64)
    return x + (std * noise).to(x.dtype)
'''),
            ("random_mask", '''
def random_mask(x, mask_prob, generator=None):
    mask = torch.bernoulli(torch.full(x.shape, float(mask_prob)), generator=generator).bool()
    x_masked = torch.where(mask, torch.zeros_like(x), x)
    return x_masked, mask
'''),
            ("masked_reconstruction_loss", '''
def masked_reconstruction_loss(x_hat, x, mask):
    weights = mask.to(x.dtype)
    return (((x_hat - x) ** 2) * weights).sum() / weights.sum()
'''),
        ],
    },
    {
        "name": "step_with_a_dispatch_table",
        "function": "training_step",
        "source": '''
def training_step(model, optimizer, x, variant="vanilla", generator=None, noise_std=0.5, mask_prob=0.5):
    def vanilla():
        return reconstruction_loss(model(x), x)

    def denoising():
        return reconstruction_loss(model(add_gaussian_noise(x, noise_std, generator=generator)), x)

    def masked():
        inputs, mask = random_mask(x, mask_prob, generator=generator)
        return masked_reconstruction_loss(model(inputs), x, mask)

    losses = {"vanilla": vanilla, "denoising": denoising, "masked": masked}
    if variant not in losses:
        raise ValueError(f"unknown variant {variant}")
    optimizer.zero_grad(set_to_none=True)
    loss = losses[variant]()
    loss.backward()
    optimizer.step()
    return float(loss.detach())
''',
    },
    {
        "name": "sklearn_probe_and_eigh_pca",
        "edits": [
            ("linear_probe_accuracy", '''
def linear_probe_accuracy(encoder, train, test, num_labels=None, generator=None):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    n = len(train[0]) if num_labels is None else num_labels
    with torch.no_grad():
        F_train = encoder(train[0][:n]).double().numpy()
        F_test = encoder(test[0]).double().numpy()
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    probe.fit(F_train, train[1][:n].numpy())
    return float((probe.predict(F_test) == test[1].numpy()).mean())
'''),
            ("pca_components", '''
def pca_components(X, k):
    X = X.double()
    centred = X - X.mean(dim=0, keepdim=True)
    covariance = centred.T @ centred / (len(X) - 1)
    values, vectors = torch.linalg.eigh(covariance)
    order = torch.argsort(values, descending=True)[:k]
    return vectors[:, order].float()
'''),
        ],
    },
]


#: Implements nothing: the corruptions leave x as it is (a copy), the probe reports 0 and PCA zeros.
IMPLEMENTS_NOTHING = """
import torch
def add_gaussian_noise(x, std, generator=None):
    return x.clone()
def random_mask(x, mask_prob, generator=None):
    return x.clone(), torch.zeros(x.shape, dtype=torch.bool)
def linear_probe_accuracy(encoder, train, test, num_labels=None, generator=None):
    return 0.0
def pca_components(X, k):
    return torch.zeros(X.shape[1], k, dtype=X.dtype)
_forged = {name: globals()[name] for name in ("add_gaussian_noise", "random_mask", "linear_probe_accuracy",
                                               "pca_components")}
"""

#: No hidden test rests on properties alone: a forgery that sends what each property accepts passes none.
FORGEABLE_PROPERTIES = set()


# A notebook takes about 30 s to grade: known-wrong variants share notebooks where no test one must fail
# reaches a function another replaces (``pack_wrong``); correct alternatives are packed together.
pack_wrong(WRONG, master("autoencoders"))
pack_correct(CORRECT)
