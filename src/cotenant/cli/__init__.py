"""The ``cotenant`` command line: thin commands over library calls."""
