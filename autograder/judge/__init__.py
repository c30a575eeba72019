"""Scoring outside the student's kernel: the verdict on a sealed run and the words a reader may see."""
