"""Old import path of :mod:`helpers.core.pdf`, kept for notebooks already handed out.

The same module object, not a copy: state and monkeypatches are shared.
"""

import sys

from .core import pdf as _module

sys.modules[__name__] = _module
