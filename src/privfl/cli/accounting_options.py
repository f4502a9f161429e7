"""Options and output shared by the ``privfl account`` and ``privfl calibrate`` commands.

The choice options (:func:`choices`), the accountant settings (orders, conversion,
discretisation: :func:`accountant_options`), the options of a PriFedSync setting (Zheng et al.
2021) and of random participation (Hasircioglu and Gunduz 2022), each with its --help text, and
:func:`emit`, which prints a report as text or as one ``--json`` object, and ``--fdp-curve``
(:func:`write_fdp_curves`).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from privfl.accounting.events import Neighbouring, Sampling, Unit
from privfl.accounting.methods import AccountingOptions


def choices(name: str, *values: str) -> Any:
    """The ``str`` Enum of a choice option: its values in the order --help lists them.

    A member's name is its value with '-' as '_' (``gdp-clt`` is ``.gdp_clt``).
    """
    members = [(value.replace("-", "_"), value) for value in values]
    return Enum(name, members, type=str, module=__name__)


Conversion = choices("Conversion", "improved", "classic")

NeighbouringOpt = Annotated[
    Neighbouring,
    typer.Option(help="Neighbouring datasets: add/remove one record, or replace one record."),
]
SamplingOpt = Annotated[
    Sampling,
    typer.Option(
        help="Poisson (each record independently with rate q) or fixed-size batches drawn "
        "uniformly without replacement (q = B/n)."
    ),
]
OrdersOpt = Annotated[
    str,
    typer.Option(
        help="RDP orders: 'default', 'legacy' ({1.1,...,10.9} U {12,...,63}) or a comma list."
    ),
]
ConversionOpt = Annotated[
    Conversion,
    typer.Option(
        help="RDP to (eps, delta): 'improved' (Balle et al. 2020) or 'classic' "
        "(eps = rdp + log(1/delta)/(a-1))."
    ),
]
UnitOpt = Annotated[
    Unit,
    typer.Option(
        help="Unit of privacy (the label of the results): 'record' (DP-SGD: z and q are per "
        "record) or 'client' (user-level DP: each client's whole update is clipped to C, z is "
        "the noise std / C on the sum of clipped updates, q the rate clients are sampled at)."
    ),
]
DiscretizationOpt = Annotated[
    float, typer.Option(help="PLD value discretisation interval (smaller: tighter, slower).")
]

#: --noise-multiplier, the one name of the noise setting in every command
Z_HELP = (
    "z: noise multiplier, the std of the Gaussian noise on the sum of clipped gradients divided "
    "by the clipping norm C (Opacus / TF Privacy)."
)


def accountant_options(
    orders: str, conversion: Conversion, discretization: float
) -> AccountingOptions:
    """The accountants' settings from the --orders, --conversion and --discretization options."""
    return AccountingOptions(
        orders=orders, conversion=conversion.value, discretization=discretization
    )


def emit(
    as_json: bool,
    command: str,
    setting: dict[str, Any],
    results: list,
    *,
    unsupported: dict[str, str] | None = None,
    footnotes: tuple[str, ...] = (),
    extra: dict[str, Any] | None = None,
    warning: str = "",
) -> None:
    """Print a report (text or ``--json``). A ``warning`` also goes to stderr as one line
    ``privfl: warning: ...`` and into the JSON as a ``warning`` field."""
    from privfl.cli.output import print_json, print_report

    if warning:
        typer.echo(f"privfl: warning: {warning}", err=True)
    if as_json:
        payload: dict[str, Any] = {"command": command, "setting": setting}
        if warning:
            payload["warning"] = warning
        payload.update(extra or {})
        payload["results"] = [r.to_dict() for r in results]
        if unsupported:
            payload["unsupported"] = unsupported
        print_json(payload)
    else:
        print_report(
            f"privfl {command}", setting, results, unsupported=unsupported, footnotes=footnotes
        )


# ---------------------------------------------------------------- PriFedSync (Zheng et al. 2021)
RecordsPerClientOpt = Annotated[int, typer.Option(help="n: records per client.")]
BatchSizeOpt = Annotated[int, typer.Option(help="B: local batch size (without replacement).")]
LocalStepsOpt = Annotated[int, typer.Option(help="K: local steps per round.")]
RoundsOpt = Annotated[int, typer.Option(help="R: synchronisation rounds.")]


# ------------------------------------------- random participation (Hasircioglu and Gunduz 2022)
Server = choices("Server", "trusted", "untrusted", "untrusted-participants-only")


ClientRateOpt = Annotated[float, typer.Option(help="p: probability a client participates.")]
RecordRateOpt = Annotated[float, typer.Option(help="q: Poisson rate of records in a client.")]
RecordsOpt = Annotated[
    int, typer.Option(help="d: records of the client holding x' (besides x'); use the largest.")
]
# the option keeps its name --clip; the Python parameter is clip_norm (docs/naming.md)
ClipOpt = Annotated[float, typer.Option("--clip", help="C: per-record clip norm.")]
ServerOpt = Annotated[Server, typer.Option(help="Who sees what (threat model).")]


def participation_card(p: float, q: float, d: int, server: Server, **more: Any) -> dict:
    """The setting rows of `account participation` and `calibrate participation`."""
    return {
        "unit": "record",
        "neighbouring": "add-remove (record x' of one client)",
        "sampling": f"random participation: clients p = {p:g}, records q = {q:g}, d = {d}",
        "server": server.value,
        **more,
    }


FdpCurveOpt = Annotated[Path | None, typer.Option(
    "--fdp-curve", help="Also write the guarantee's trade-off curve (f-DP, Zheng et al. 2021; "
    "a bound's curve is a lower bound of the true one) to this JSON file and a plot beside it "
    "(same name, .png).", show_default=False)]


def write_fdp_curves(path: Path | None, command: str, setting: dict[str, Any], event: object,
                     delta: float, methods: Any, options: AccountingOptions) -> None:
    """``--fdp-curve PATH``: the trade-off curves of ``event``'s results as JSON and PNG
    (:mod:`privfl.accounting.fdp.curve`); nothing when ``path`` is None."""
    if path is None:
        return
    import json

    from privfl.accounting.fdp.curve import plot_curves, tradeoff_curves

    path = Path(path)
    if path.suffix != ".json":
        raise ValueError(f"--fdp-curve = {str(path)!r} is not allowed: must end in .json (the "
                         "plot is written beside it as .png)")
    curves = tradeoff_curves(event, delta, methods, options=options)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"command": command, "setting": setting, "delta": delta,
                                "curves": curves}, indent=1) + "\n", encoding="utf-8")
    plot_curves(curves, str(path.with_suffix(".png")), f"privfl {command}: trade-off curve")

