"""The platforms a course grades on besides course grade: Gradescope and nbgrader."""
