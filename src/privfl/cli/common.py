"""Pieces shared by the command modules: error handling and common options."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object for scripts.")]


def _one_line(error: BaseException) -> str:
    """The error's message on one line (whitespace runs, newlines included, become a space)."""
    return " ".join(str(error).split()) or type(error).__name__


def user_errors(command: F) -> F:
    """Turn bad input into a one-line message on stderr and exit status 2, never a traceback.

    A ``ValueError`` (validation, an unsupported combination, an accountant's refusal naming
    the argument to change) is printed as it is. As a last resort, for inputs no check caught,
    a ``MemoryError`` or an ``ArithmeticError`` (overflow, division by zero) is reported as
    such with a hint; the accountants are meant to refuse those inputs first with a message
    naming the argument.
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ValueError as error:
            message = _one_line(error)
        except MemoryError as error:
            message = (
                f"out of memory ({_one_line(error)}): this input needs more memory than is "
                "available; make it cheaper (e.g. a larger --discretization, fewer steps, "
                "smaller orders, more noise) or use another --method"
            )
        except ArithmeticError as error:
            message = (
                f"numerical failure ({type(error).__name__}: {_one_line(error)}): an argument is "
                "too large or too small for floating point; change the extreme argument"
            )
        typer.echo(f"privfl: error: {message}", err=True)
        raise typer.Exit(code=2) from None

    return wrapper  # type: ignore[return-value]
