"""nbgrader: the course's source folder, and grades read back from its gradebook."""
