"""Errors of the instrument package."""


class TraceError(Exception):
    """A trace directory that cannot be read; the message names file and rank."""
