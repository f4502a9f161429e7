"""The ``privfl`` application: this module makes it and registers every command; each command
lives in its own module (``account ...``: :mod:`privfl.cli.account`; ``calibrate ...``:
:mod:`privfl.cli.calibrate`; ``run``: :mod:`privfl.cli.run`; ...). The entry point,
:func:`privfl.cli.main.main`, imports it once a Ctrl-C can be answered in one line.

Errors in the user's input (a ``ValueError`` from validation, an unsupported combination) are
printed as one line on stderr and exit with status 2, without a traceback.
"""

from __future__ import annotations

from typing import Annotated

import typer

from privfl.cli.account import register as register_account
from privfl.cli.audit import audit_app
from privfl.cli.calibrate import register as register_calibrate
from privfl.cli.certify import certify_app
from privfl.cli.correlated import register as register_correlated
from privfl.config.algorithms import register_builtin_algorithms

# the application: every command validates configurations of the built-in algorithms, whose
# models (privfl.config.algorithms) import no torch, so a typo is answered before torch loads
register_builtin_algorithms()

app = typer.Typer(
    help="privfl: differentially private federated learning with trustworthy privacy numbers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
account_app = typer.Typer(help="Compute privacy guarantees (epsilon, delta) of what ran.")
calibrate_app = typer.Typer(help="Solve for noise, steps or sampling rate under a budget.")
app.add_typer(account_app, name="account")
app.add_typer(calibrate_app, name="calibrate")
register_correlated(account_app, calibrate_app)  # dp-ftrl, bandmf (privfl.cli.correlated)
register_account(account_app)  # dpsgd, fedfdp, last-iterate, participation
register_calibrate(calibrate_app)  # participation, dpsgd, fedfdp
app.add_typer(audit_app, name="audit")
app.add_typer(certify_app, name="certify")


from privfl.cli.check_privacy import check_privacy_command  # noqa: E402
from privfl.cli.compare import compare_command  # noqa: E402
from privfl.cli.distortion import distortion_app  # noqa: E402
from privfl.cli.flower import flower_app  # noqa: E402
from privfl.cli.help_text import hide_flag_types, unwrap_app  # noqa: E402
from privfl.cli.info import init_command, list_command, version_callback  # noqa: E402
from privfl.cli.reproduce import REPRODUCE_HELP, reproduce_command  # noqa: E402
from privfl.cli.run import run_command  # noqa: E402
from privfl.cli.sweep import SWEEP_HELP, sweep_command  # noqa: E402
from privfl.cli.tradeoff import TRADEOFF_HELP, tradeoff_command  # noqa: E402

app.command("run", help=run_command.__doc__)(run_command)
app.command("sweep", help=SWEEP_HELP)(sweep_command)
app.command("list")(list_command)
app.command("init")(init_command)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=version_callback, is_eager=True,
        help="Print privfl's version (and torch's, python's) and exit.")] = False,
) -> None:
    """privfl: differentially private federated learning with trustworthy privacy numbers."""
app.command("compare")(compare_command)
app.command("check-privacy")(check_privacy_command)
app.command("tradeoff", help=TRADEOFF_HELP)(tradeoff_command)
app.command("reproduce", help=REPRODUCE_HELP)(reproduce_command)
app.add_typer(distortion_app, name="distortion")
app.add_typer(flower_app, name="flower")
unwrap_app(app)  # each paragraph of every help on one line: rich wraps it to the terminal
hide_flag_types()  # --json, not --json <bool>
