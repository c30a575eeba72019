"""The seal: a sandbox per submission (bubblewrap or POSIX separation), its runs and its limits."""
