"""Old import path of :mod:`helpers.core.golden`, kept for notebooks already handed out.

The same module object, not a copy: state and monkeypatches are shared.
"""

import sys

from .core import golden as _module

sys.modules[__name__] = _module
