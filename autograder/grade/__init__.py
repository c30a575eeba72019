"""course grade: a folder of submissions graded (sealed by default), rows and results written."""
