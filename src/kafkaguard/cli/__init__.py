"""The ``kafkaguard`` command line (Typer). ``main`` composes one sub-app per command group."""
