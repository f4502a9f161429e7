"""Pieces shared by the command modules: error handling and common options."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object for scripts.")]


def user_errors(command: F) -> F:
    """Turn a ValueError into a one-line message and exit status 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ValueError as error:
            typer.echo(f"privfl: error: {error}", err=True)
            raise typer.Exit(code=2) from None

    return wrapper  # type: ignore[return-value]
