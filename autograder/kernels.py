"""The IPython setup of the notebook kernels that ``course build`` and ``course grade`` start."""

from __future__ import annotations

from pathlib import Path

#: Environment variable IPython reads its profile (config, startup scripts) from.
IPYTHONDIR_ENV = "IPYTHONDIR"


def isolated_ipython_dir(parent: Path) -> Path:
    """A fresh IPYTHONDIR under ``parent``, for the kernels that execute notebooks.

    The grader's own ``~/.ipython`` (startup scripts, extensions) must not change a grade, and the
    kernels log errors only: ipykernel's warning that it talks to its client over local TCP is
    noise in every build and grading log.
    """
    profile = Path(parent) / "ipython" / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_kernel_config.py").write_text('c.IPKernelApp.log_level = "ERROR"\n', encoding="utf-8")
    return profile.parent
