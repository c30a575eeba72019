"""Instructor tools: build student notebooks and autograders, grade submissions, check for leaks.

The console script ``course`` (:mod:`autograder.cli`) is the entry point.
"""
