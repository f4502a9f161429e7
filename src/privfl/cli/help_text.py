"""Help texts that rich wraps to the terminal: a docstring's hard line breaks removed.

Typer shows a command's docstring (or ``help=``) as written, so the line breaks of a docstring
wrapped at 100 columns in the source appear in the middle of sentences on a terminal of another
width (``privfl --help`` listed ``compare``'s help broken after "(with its accountant and unit)").
:func:`unwrap` joins the lines of each paragraph (paragraphs are separated by a blank line and
stay separate; a line starting a bullet, ``* `` or ``- ``, keeps its break) and
:func:`unwrap_app` applies it to every command and group of a Typer app, once, after they are
registered.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["hide_flag_types", "unwrap", "unwrap_app"]

_BULLETS = ("* ", "- ", "• ")


def unwrap(text: str | None) -> str | None:
    """``text`` with each paragraph on one line (None stays None)."""
    if text is None:
        return None
    paragraphs = []
    for block in inspect.cleandoc(text).split("\n\n"):
        lines: list[str] = []
        for line in block.splitlines():
            line = line.strip()
            if lines and not line.startswith(_BULLETS):
                lines[-1] = f"{lines[-1]} {line}" if line else lines[-1]
            elif line:
                lines.append(line)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(p for p in paragraphs if p)


def unwrap_app(app: Any) -> None:
    """Unwrap the help of every command and group of Typer ``app`` (recursively)."""
    for command in app.registered_commands:
        command.help = unwrap(command.help or inspect.getdoc(command.callback))
    callback = getattr(app.registered_callback, "callback", None)
    if app.info.help is not None or callback is not None:
        app.info.help = unwrap(app.info.help if isinstance(app.info.help, str)
                               else inspect.getdoc(callback))
    for group in app.registered_groups:
        if isinstance(group.help, str):
            group.help = unwrap(group.help)
        unwrap_app(group.typer_instance)


def hide_flag_types() -> None:
    """Show on/off flags (``--json``, ``--dry-run``) without a value type: typer >= 0.29 prints
    ``<bool>`` beside them, as if they took a value. Older typers (Flower's pin) do not have
    the method and need nothing."""
    try:
        from typer.core import TyperOption
    except ImportError:  # pragma: no cover - typer without its core module
        return
    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_privfl_flags_hidden", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if self.is_flag and self.metavar is None:
            return None
        return shown(self, ctx)

    display_type_rich._privfl_flags_hidden = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich

