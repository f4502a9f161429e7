"""Pieces shared by the command modules: error handling and common options."""

from __future__ import annotations

import functools
import inspect
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


class OptionGroup:
    """Options that several commands share, declared once and received as one value.

    ``OptionGroup(build, name=(AnnotatedAlias, default), ...)``. A command takes the group as
    the default of one parameter (``mc: dict[str, Any] = MONTE_CARLO``); ``option_groups``
    puts the group's options in that parameter's place on the command line, in this order and
    with these defaults, and calls the command with ``build(**their values)`` there. Annotate
    the group's name ``Any`` (``MONTE_CARLO: Any = OptionGroup(...)``) so that a type checker
    accepts it as the default of a parameter typed as what ``build`` returns.
    """

    def __init__(self, build: Callable[..., Any], **options: tuple[Any, Any]) -> None:
        self.build = build
        self.options = options

    def with_defaults(self, **defaults: Any) -> OptionGroup:
        """The same options with other defaults for some of them."""
        unknown = set(defaults) - set(self.options)
        if unknown:
            raise TypeError(f"no option {', '.join(sorted(unknown))} in this group")
        return OptionGroup(
            self.build,
            **{
                name: (alias, defaults.get(name, default))
                for name, (alias, default) in self.options.items()
            },
        )


def option_groups(command: F) -> F:
    """Expand the ``OptionGroup`` defaults of ``command`` into their options (see OptionGroup).

    Apply it below ``user_errors``, so that a ValueError from a group's ``build`` is reported
    like one from the command.
    """
    signature = inspect.signature(command, eval_str=True)
    groups = {
        name: parameter.default
        for name, parameter in signature.parameters.items()
        if isinstance(parameter.default, OptionGroup)
    }
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        group = groups.get(parameter.name)
        if group is None:
            parameters.append(parameter.replace(kind=keyword))
        else:
            parameters.extend(
                inspect.Parameter(name, keyword, annotation=alias, default=default)
                for name, (alias, default) in group.options.items()
            )

    @functools.wraps(command)
    def wrapper(**options: Any) -> Any:
        for name, group in groups.items():
            options[name] = group.build(**{option: options.pop(option) for option in group.options})
        return command(**options)

    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper  # type: ignore[return-value]
