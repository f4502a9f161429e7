"""Ctrl-C at any moment of a command: one line, never a traceback.

Python turns SIGINT into a ``KeyboardInterrupt`` wherever the interpreter happens to be. Inside
a C extension's initialisation (torch's import takes seconds) the import machinery reports it
as another exception, e.g. ``ImportError: initialization failed``, which would read as an
internal error. :func:`install` (run when :mod:`privfl.cli.main` is imported, the console
script's first step, and again by :func:`privfl.cli.main.main`) records that a SIGINT arrived,
so that any exception after it is reported as the interrupt it is (:func:`received`);
:func:`report` writes the one line (once) and ignores further SIGINTs. The handler raises
``KeyboardInterrupt`` as Python's own does, so nothing else changes. Only ``sys`` and
CPython's ``_signal`` (what ``signal`` wraps, without the enum module that takes tens of
milliseconds to import) are imported: this runs before anything else is loaded.
"""

from __future__ import annotations

import sys

try:
    import _signal as signal  # the same functions and constants, without importing enum
except ImportError:  # not CPython
    import signal

__all__ = ["install", "quiet", "quiet_at_exit", "received", "report"]

#: "received": a SIGINT arrived since install(); "reported": its line was written;
#: "at_exit": quiet() is registered to run at the interpreter's exit
_STATE = {"received": False, "reported": False, "at_exit": False}


def _on_sigint(signum, frame) -> None:  # noqa: ANN001 - the signal module's handler signature
    _STATE["received"] = True
    raise KeyboardInterrupt


def _set(handler) -> None:  # noqa: ANN001 - a handler or signal.SIG_IGN
    try:  # noqa: SIM105 - contextlib would be one more import before the handler is set
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread (the command line called from a thread)
        pass


def install() -> None:
    """Record SIGINTs from now on (and raise ``KeyboardInterrupt``, as Python's default handler
    does). A process that ignores SIGINT (started in the background) or handles it itself is
    left alone."""
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _on_sigint):
        _STATE.update(received=False, reported=False)
        _set(_on_sigint)


def received() -> bool:
    """True once a SIGINT arrived since :func:`install`."""
    return _STATE["received"]


def quiet() -> None:
    """Ignore further SIGINTs (the interrupt is being reported: a second Ctrl-C would only cut
    its line short or print a traceback). Only where :func:`install` set the handler."""
    if signal.getsignal(signal.SIGINT) is _on_sigint:
        _set(signal.SIG_IGN)


def report(line: str) -> None:
    """Write the interrupt's one line on stderr, unless one was written already (``privfl
    run`` writes its own, with the resume command; the entry point's plain one is then
    skipped); further SIGINTs are ignored from here on (:func:`quiet`)."""
    quiet()
    if _STATE["reported"]:
        return
    _STATE["reported"] = True
    sys.stderr.write(line.rstrip("\n") + "\n")
    sys.stderr.flush()


def quiet_at_exit() -> None:
    """Ignore SIGINT once the interpreter exits (once registered, for every later command in the
    process): a Ctrl-C during torch's exit hooks, registered before and so run after this one,
    would print a traceback. A caller in the same process keeps its handler until then."""
    if not _STATE["at_exit"]:
        import atexit

        atexit.register(quiet)
        _STATE["at_exit"] = True
