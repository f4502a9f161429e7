"""Exceptions raised by :mod:`privfl.data`."""

from __future__ import annotations


class DataFormatError(ValueError):
    """A data file is corrupt, truncated or not in the expected format.

    The message names the file and what was wrong with it.
    """


class ChecksumError(ValueError):
    """A downloaded or cached file does not match its published checksum."""


class DownloadError(OSError):
    """No mirror of a dataset file could be reached (no network, server down, HTTP error).

    The one-line message names the dataset, what each URL answered and where to copy the files
    by hand; ``tried`` holds the URL part alone.
    """

    def __init__(self, message: str, tried: str = "") -> None:
        super().__init__(message)
        self.tried = tried


class DatasetNotFoundError(FileNotFoundError):
    """A data source is not available locally.

    The message says exactly how to obtain it (a ``pip``/``apt-get`` command or the privfl
    download function to call, and the directory it is looked for in).
    """
