"""The part of ``helpers`` the grader runs too: golden values, PDF rendering, the offline models
and the names grader and kernel agree on (:mod:`.contract`).

Students never import from here directly; the old paths (``helpers.golden``, ``helpers.pdf``,
``helpers.models``) still work for notebooks already handed out.
"""
