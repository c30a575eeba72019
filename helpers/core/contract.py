"""The names the grader and the helpers agree on, in one place (standard library only).

The grader sets these environment variables; the helpers read them inside the notebook's kernel.
What the grader and its sandbox runner agree on besides is :mod:`autograder.sandbox.protocol`, which builds
on this module (and is copied into the sandbox with a copy of it).
"""

#: The setting training cells size themselves by (``full``, ``quick``, ``grading``); the grader
#: sets ``grading`` and it wins over the notebook's ``use_setting``.
SETTING_ENV = "COURSE_SETTING"
#: The older switch: ``COURSE_FAST=1`` means the grading setting.
FAST_ENV = "COURSE_FAST"
#: How ``expect`` behaves (``record`` at build time, ``collect`` in the sandbox, ``compare`` in
#: otter's own runs), the golden file it records to or compares with, and where it collects to.
GOLDEN_MODE_ENV = "COURSE_GOLDEN_MODE"
GOLDEN_FILE_ENV = "COURSE_GOLDEN_FILE"
GOLDEN_OUTBOX_ENV = "COURSE_GOLDEN_OUTBOX"
#: The modules (comma-separated) that hand the grader's own measures to ``helpers.core.measures``
#: (``provide``): set by the build for the kernel that records golden values, since the helpers never
#: import the grader themselves.
MEASURE_MODULES_ENV = "COURSE_MEASURE_MODULES"
#: Name of the golden file next to the notebook inside the autograder.
GOLDEN_FILENAME = "golden_values.json"
#: Where the offline models are converted and kept (the grader shares its cache read-only).
MODEL_CACHE_ENV = "COURSE_MODEL_CACHE"
#: OpenMP's wait policy for every kernel that trains: idle threads sleep instead of spinning.
#: PyTorch's default spinning made training 10-20x slower beside one other busy program;
#: OpenMP reads this once, when torch loads it. The notebooks (``helpers.cpu``), the build and
#: the sandbox all set it.
WAIT_POLICY_ENV, WAIT_POLICY = "OMP_WAIT_POLICY", "PASSIVE"
