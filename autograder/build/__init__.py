"""From master notebooks to what a course hands out: the build, its checks, the release and new assignments."""
