"""course report: the HTML report, its statistics, similarity and the gradebook."""
