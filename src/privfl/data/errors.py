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
    download function to call, and the directory it is looked for in). ``settings``, where
    given, says the same in configuration keys (``data.download: true``, ``data.dataset:
    mnist-5k``, and ``privfl run``'s ``--set``), for a run described by a configuration
    (:func:`privfl.algorithms.builders.build_dataset` raises it in place of the message).
    """

    def __init__(self, message: str, settings: str = "") -> None:
        super().__init__(message)
        self.settings = settings
