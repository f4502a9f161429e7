"""Pieces shared by the command modules: error handling and common options."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])

#: exit status of ``privfl run`` when the training diverged (a non-finite loss or model: the
#: run stopped at that round, wrote no model.pt and kept its last finite checkpoint)
EXIT_DIVERGED = 3

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object for scripts.")]
TargetDeltaOpt = Annotated[float, typer.Option(help="Target delta, in (0, 1).")]
TargetEpsilonOpt = Annotated[float, typer.Option(help="Target epsilon, > 0.")]


def _one_line(error: BaseException) -> str:
    """The error's message on one line (whitespace runs, newlines included, become a space)."""
    return " ".join(str(error).split()) or type(error).__name__


def _os_error(error: OSError) -> str:
    """An OSError as the user can act on it: what failed on which path, or the message of the
    errors privfl raises itself (download failures, missing datasets) as they are."""
    if error.filename is None or not error.strerror:
        return _one_line(error)
    where = f"{error.filename!s}" + (f" -> {error.filename2!s}" if error.filename2 else "")
    return f"cannot use {where}: {error.strerror} (check the path and its permissions)"


def error_message(error: BaseException) -> tuple[str, int]:
    """``(one-line message, exit status)`` for an exception reaching the command line.

    ``ValueError`` (validation, an unsupported combination, an accountant's refusal naming the
    argument to change) and ``OSError`` (paths, permissions, downloads, missing datasets) are the
    user's to fix: exit status 2. As a last resort, ``MemoryError`` and ``ArithmeticError`` get a
    hint (the accountants are meant to refuse such inputs first, naming the argument), and any
    other exception is reported as an internal error (exit status 1; set ``PRIVFL_TRACEBACK=1``
    to see the traceback).
    """
    if isinstance(error, ValueError):
        return _one_line(error), 2
    if isinstance(error, OSError):
        return _os_error(error), 2
    if isinstance(error, MemoryError):
        return (
            f"out of memory ({_one_line(error)}): this input needs more memory than is "
            "available; make it cheaper (e.g. a larger --discretization, fewer steps, "
            "smaller orders, more noise) or use another --method"
        ), 2
    if isinstance(error, ArithmeticError):
        return (
            f"numerical failure ({type(error).__name__}: {_one_line(error)}): an argument is "
            "too large or too small for floating point; change the extreme argument"
        ), 2
    return (f"internal error ({type(error).__name__}: {_one_line(error)[:300]}): please report "
            "it; PRIVFL_TRACEBACK=1 shows where it happened"), 1


#: a privfl command inside a message: a subcommand, then an option or a path ("continue with:
#: privfl run --resume DIR", "privfl run my.yaml --dry-run"), not prose ("a privfl run")
_COMMAND = re.compile(r"(?<![\w./-])privfl (?=(?:run|check-privacy|compare|sweep|init|account|"
                      r"calibrate|certify \w+) (?:--|\S*[/.]))")


def command_name() -> str:
    """How to run privfl again, for the commands printed in hints, so that each runs as
    printed: ``privfl`` when that name on PATH is the program running now; the path it was
    invoked by when it is not (``.venv/bin/privfl`` after ``make install``, which puts nothing
    on PATH); ``PYTHON -m privfl.cli.main`` when run as a module; ``privfl`` otherwise (the
    command line called from Python, e.g. by tests)."""
    import os
    import shlex
    import shutil

    invoked = sys.argv[0] if sys.argv else ""
    if os.path.basename(invoked) == "privfl":
        found = shutil.which("privfl")
        here = shutil.which(invoked) if os.sep not in invoked else invoked
        if found and here and os.path.realpath(found) == os.path.realpath(here):
            return "privfl"
        return shlex.quote(invoked)
    if Path(invoked).parts[-3:] == ("privfl", "cli", "main.py"):
        return f"{shlex.quote(sys.executable)} -m privfl.cli.main"
    return "privfl"


def runnable(text: str) -> str:
    """``text`` with every privfl command in it spelled as :func:`command_name` (a hint in an
    error raised below the command line says ``privfl run ...``)."""
    name = command_name()
    return text if name == "privfl" else _COMMAND.sub(lambda _: f"{name} ", text)


def fail(error: BaseException) -> typer.Exit:
    """Print ``error`` as one line on stderr; the ``typer.Exit`` to raise (see
    :func:`error_message`). With ``PRIVFL_TRACEBACK=1`` the traceback is printed first. After
    a Ctrl-C the error is its consequence: ``privfl: interrupted``, exit status 130."""
    import os
    import traceback

    from privfl.cli import interrupt

    if interrupt.received():  # an error caused by a Ctrl-C (an import cut short): the interrupt
        interrupt.report("privfl: interrupted")
        return typer.Exit(code=130)
    if os.environ.get("PRIVFL_TRACEBACK") == "1":
        traceback.print_exception(error, file=sys.stderr)
    message, code = error_message(error)
    typer.echo(f"privfl: error: {runnable(message)}", err=True)
    return typer.Exit(code=code)


def user_errors(command: F) -> F:
    """Turn any error into a one-line message on stderr and an exit status, never a traceback
    (see :func:`error_message`)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt, SystemExit):
            raise
        except Exception as error:  # noqa: BLE001 - reported as one line, see error_message
            raise fail(error) from None

    return wrapper  # type: ignore[return-value]
