"""Registers the commands that are not part of the core run (filled in by later work)."""


def register(cli) -> None:
    return None
