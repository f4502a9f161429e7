"""Exceptions raised by :mod:`privfl.data`."""

from __future__ import annotations


class DataFormatError(ValueError):
    """A data file is corrupt, truncated or not in the expected format.

    The message names the file and what was wrong with it.
    """


class ChecksumError(ValueError):
    """A downloaded or cached file does not match its published checksum."""


class DatasetNotFoundError(FileNotFoundError):
    """A data source is not available locally.

    The message says exactly how to obtain it (a ``pip``/``apt-get`` command or the privfl
    download function to call, and the directory it is looked for in).
    """
