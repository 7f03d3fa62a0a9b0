"""Command line: thin click commands over the packages."""
