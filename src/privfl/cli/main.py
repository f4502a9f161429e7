"""The ``privfl`` command line's entry point, :func:`main` (the application and its commands:
:mod:`privfl.cli.app`).

Only the standard library is imported before :func:`main` runs, so that a Ctrl-C at any moment,
even while typer, the commands or torch are still being imported, ends in one line
(``privfl: interrupted``, exit status 130; :mod:`privfl.cli.interrupt`) and never a traceback.
``from privfl.cli.main import app`` still gives the application (PEP 562 ``__getattr__``).
"""

from __future__ import annotations

import sys

from privfl.cli import interrupt

interrupt.install()  # first: a Ctrl-C while the rest loads is one line too (main())

#: exit status after a Ctrl-C (128 + SIGINT, as shells report it)
EXIT_INTERRUPTED = 130


def __getattr__(name: str) -> object:
    """The application's names (``app``, ``account_app``, ...) from :mod:`privfl.cli.app`."""
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module("privfl.cli.app"), name)


def _unknown_option(error: Exception) -> str:
    """An unknown option's message with the options it abbreviates or is part of (``--noise``:
    ``--noise-multiplier``; click's own guess by string similarity offered ``--unit``); empty
    where there are none (click's message is used)."""
    name, ctx = getattr(error, "option_name", None), getattr(error, "ctx", None)
    if not name or ctx is None or not name.startswith("--"):
        return ""
    options = [opt for param in ctx.command.params
               for opt in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
               if opt.startswith("--")]
    word = name.removeprefix("--")
    found = [opt for opt in options if opt.startswith(name)] or [
        opt for opt in options if word and word in opt]
    if not found:
        return ""
    return f"No such option: {name} (did you mean {' or '.join(dict.fromkeys(found))}?)"


def _run(argv: list[str] | None) -> int | None:
    try:  # typer >= 0.21 vendors click; older ones (Flower 1.42 pins typer < 0.21) use click
        from typer._click.exceptions import UsageError
    except ImportError:
        from click.exceptions import UsageError
    import typer

    from privfl.cli.app import app

    try:
        return app(argv, standalone_mode=False)
    except UsageError as error:
        where = error.ctx.command_path if error.ctx is not None else "privfl"
        message = _unknown_option(error) or " ".join(error.format_message().split())
        if message:  # empty: the help was asked for by giving no arguments, and is shown
            typer.echo(f"privfl: error: {message} (see: {where} --help)", err=True)
        return 2


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Usage errors (an unknown option, a missing argument, a value
    outside a choice) are one line on stderr naming the command, exit status 2; ``--help``
    shows the usage. A Ctrl-C is one line, exit status 130, whatever was running (a command
    that can be continued, ``privfl run``, says how itself)."""
    if not interrupt.received():  # one that came while this module loaded is kept
        interrupt.install()
    try:
        code = _run(argv)
    except KeyboardInterrupt:
        interrupt.report("privfl: interrupted")
        code = EXIT_INTERRUPTED
    except Exception:  # an import cut short by the Ctrl-C raises e.g. ImportError instead
        if not interrupt.received():
            raise
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED and interrupt.received():
        interrupt.report("privfl: interrupted")
    interrupt.quiet_at_exit()  # done: a Ctrl-C while the interpreter shuts down is ignored
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
