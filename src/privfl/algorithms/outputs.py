"""What a run writes, and whether the printed guarantee covers it (design principle 6).

Everything a run writes is a release. Each metrics key and each file is an :class:`Output`:
``covered`` when publishing it keeps the printed guarantee true (it is a function of what the
guarantee releases and of public settings or held-out test data), else the ``reason`` says what
it is computed from (unnoised training data, a realised count the guarantee assumes secret,
private state, ...).

Metrics keys are classified by the algorithm (:meth:`RoundAlgorithm.output_classes
<privfl.algorithms.base.RoundAlgorithm.output_classes>`) on top of :data:`GENERIC_METRICS`;
a key nobody classified is treated as outside the guarantee (:data:`UNCLASSIFIED`), and the
tests require every key the algorithms write to be classified. Files are classified by the
runner (:func:`file_outputs`). With ``run.outputs: guarantee-only`` the run directory holds only
covered outputs; the rest goes to a separate private directory beside it (``DIR.private``,
:func:`private_dir_of`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "COVERED_ACCOUNTING",
    "GENERIC_METRICS",
    "OUTPUT_MODES",
    "PRIVATE_STATE",
    "RELEASED_ACCURACY",
    "TRAIN_LABEL_TEST_SETS",
    "UNCLASSIFIED",
    "UNNOISED_TRAINING",
    "Output",
    "classify_metrics",
    "file_outputs",
    "private_dir_of",
    "publishable_line",
    "split_row",
    "test_set_classes",
]

#: ``run.outputs``: ``all`` (covered and uncovered outputs in the run directory, each one
#: classified in privacy.json) or ``guarantee-only`` (the uncovered ones in ``DIR.private``).
OUTPUT_MODES = ("all", "guarantee-only")

#: (covered, reason) pairs shared by several algorithms
COVERED_ACCOUNTING = (True, "accounting output: computed from the public settings only")
UNNOISED_TRAINING = (False, "computed on the round's training data without noise")
PRIVATE_STATE = (False, "private state: models, optimizer and generator states and the "
                 "sampling decisions the guarantee assumes secret")
UNCLASSIFIED = (False, "not classified by the algorithm: treated as outside the guarantee")

#: Keys every algorithm's metrics rows may carry (:func:`privfl.algorithms.base.run_round`).
GENERIC_METRICS: dict[str, tuple[bool, str]] = {
    "round": (True, "the round index: public"),
    "privacy": COVERED_ACCOUNTING,
    "epsilon": COVERED_ACCOUNTING,
    "epsilon_method": COVERED_ACCOUNTING,
    "mu": COVERED_ACCOUNTING,
    "mu_method": COVERED_ACCOUNTING,
    "scope": COVERED_ACCOUNTING,
    "privacy_methods": COVERED_ACCOUNTING,
    "released_rounds": COVERED_ACCOUNTING,
    "seconds": (False, "wall-clock time of the round: grows with the realised cohort and batch "
                "sizes, which the guarantee may assume secret"),
    "attack_success": (True, "the evaluated model on the simulated attack's test set "
                       "(post-processing of a released model; test data are not protected)"),
    "attack_loss": (True, "the evaluated model on the simulated attack's test set "
                    "(post-processing of a released model; test data are not protected)"),
}

#: accuracy of a released model on held-out test data
RELEASED_ACCURACY = (True, "a released model on held-out test data (post-processing; the test "
                     "records are not protected by the guarantee, which covers training data)")


#: an accuracy on test sets chosen by the clients' training labels (data/partition.py)
TRAIN_LABEL_TEST_SETS = (
    False, "measured on test sets chosen by the clients' training labels (each client's test "
    "records carry the labels of its training records: data.partition shards with client_test "
    "train-labels, or dirichlet with test_sampling train-labels): one changed training record "
    "can change a test set, so the value is not post-processing of the released models; "
    "data.partition iid, shards with client_test seed-labels, or dirichlet with test_sampling "
    "proportions, draws test sets from public information only (the seed)")


def test_set_classes(classes: Mapping[str, tuple[bool, str]], accuracy_keys: Iterable[str],
                     info: Mapping[str, Any]) -> dict[str, tuple[bool, str]]:
    """``classes`` (an algorithm's ``metrics key -> (covered, reason)``) with every accuracy
    measured on the clients' test sets (``accuracy_keys``: the algorithm's ``metric_labels``)
    outside the guarantee when the dataset's ``info`` says those test sets were chosen by the
    clients' training labels (:data:`privfl.data.partition.TEST_FROM_TRAIN_LABELS`)."""
    from privfl.data.partition import TEST_FROM_TRAIN_LABELS

    out = dict(classes)
    if info.get(TEST_FROM_TRAIN_LABELS):
        out.update({key: TRAIN_LABEL_TEST_SETS for key in accuracy_keys})
    return out


@dataclass(frozen=True)
class Output:
    """One thing a run writes: a metrics key or a file (a path relative to the run directory;
    ``../NAME.private/...`` for the private directory)."""

    name: str
    kind: str  #: "metric" or "file"
    covered: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "covered": self.covered,
                "reason": self.reason}


def classify_metrics(keys: Iterable[str], classes: Mapping[str, tuple[bool, str]]
                     ) -> list[Output]:
    """One :class:`Output` per metrics key (first-seen order), from ``classes`` (the
    algorithm's table over :data:`GENERIC_METRICS`); unknown keys get :data:`UNCLASSIFIED`."""
    table = {**GENERIC_METRICS, **classes}
    return [Output(key, "metric", *table.get(key, UNCLASSIFIED))
            for key in dict.fromkeys(keys)]


def split_row(row: Mapping[str, Any], covered: set[str]) -> tuple[dict[str, Any],
                                                                   dict[str, Any]]:
    """``(covered part, private part)`` of a metrics row; both keep ``round``."""
    public = {k: v for k, v in row.items() if k in covered or k == "round"}
    private = {k: v for k, v in row.items() if k not in covered or k == "round"}
    return public, private


def private_dir_of(run_dir: Path) -> Path:
    """Where ``run.outputs: guarantee-only`` keeps what the guarantee does not cover: the
    sibling directory ``DIR.private`` (never inside the run directory, so publishing the run
    directory cannot publish it). The path is resolved first (``a/b/..`` is ``a``, whose
    sibling is ``a.private``; its last component, ``..``, would put the private directory
    inside the run directory)."""
    resolved = Path(run_dir).resolve()
    if not resolved.name:
        raise ValueError(f"run_dir = {str(run_dir)!r} is out of range: it resolves to "
                         f"{str(resolved)!r}, which has no parent to hold a sibling private "
                         "directory; choose a directory below it")
    return resolved.with_name(resolved.name + ".private")


def file_outputs(*, metrics: list[Output], accuracy_keys: Iterable[str], secure: bool,
                 guarantee_only: bool, private_name: str, checkpoints: bool,
                 tensorboard: bool, model_file: bool, redrawn: bool = False,
                 health: Iterable[str] | None = None, mlflow: bool = False,
                 client_state: bool = False, ledger: bool = False) -> list[Output]:
    """The files a run writes, each classified.

    ``metrics``: the classified metrics keys of the run; ``accuracy_keys``: those plotted in
    accuracy.png and shown in report.md; ``secure``: noise from ``os.urandom`` (else
    config.yaml's seed regenerates the noise); ``checkpoints``: the private state is still on
    disk; ``model_file``: the run writes ``model.pt`` (the released model); ``redrawn``: a
    secure resume kept the rows of rounds released twice in ``redrawn.jsonl``; ``health``: the
    metrics keys plotted in health.png (None: the run writes no health.png); ``mlflow``: the
    run is tracked in an MLflow store (``run.mlflow``, privfl.runs.mlflow_log);
    ``client_state``: the running process keeps per-client state memory-mapped in
    ``client-state/`` (:mod:`privfl.fl.client_store`: personalised models and optimizer states,
    private state kept beside the checkpoints, never beside covered outputs in guarantee-only
    mode; removed when the process ends); ``ledger``: the run keeps its release ledger
    ``ledger.jsonl`` (:mod:`privfl.runs.ledger`: the creation settings, each row metrics.jsonl
    shows, each headline and the files' digests).

    report.md and report.html show the same things (the card, the results, the final
    accuracies, the outputs table and provenance with the wall time), so they are classified
    alike; report.html's health plot shows health.png's signals, each marked outside the
    guarantee where it is (hidden until clicked)."""
    uncovered = [m.name for m in metrics if not m.covered]
    accuracy = set(accuracy_keys)
    hidden_accuracy = [m.name for m in metrics if m.name in accuracy and not m.covered]
    private = f"../{private_name}"

    timing = [] if guarantee_only else ["wall_seconds", "training_seconds", "accounting_seconds",
                                        "warnings"]

    def covered_unless(names: list[str], what: str) -> tuple[bool, str]:
        if not names:
            return True, f"{what}: only covered values"
        if guarantee_only:
            return True, f"{what}: only covered values (the others are in {private}/)"
        return False, f"{what}: includes values outside the guarantee ({', '.join(names)})"

    seeded = (False, "names the seed that regenerates the noise, batches and cohorts (seeded "
              "mode): the guarantee holds only while it is secret; set privacy.secure: true "
              "for a release")

    def unless_seeded(value: tuple[bool, str]) -> tuple[bool, str]:
        if secure:
            return value
        return seeded if value[0] else (False, f"{seeded[1]}; and {value[1]}")

    files = [
        Output("config.yaml", "file", *unless_seeded(
            (True, "the resolved settings (public); its seed does not regenerate the noise "
             "(privacy.secure: noise from os.urandom)"))),
        Output("run.json", "file", True, "the run's random id and (unless guarantee-only, "
               "which drops the wall time) its creation time: no data"),
        Output(".lock", "file", True, "the process id of the running privfl: no data"),
        Output("metrics.jsonl", "file", *covered_unless(uncovered, "one row per round")),
        Output("privacy.json", "file", *unless_seeded(COVERED_ACCOUNTING)),
        Output("privacy.png", "file", *COVERED_ACCOUNTING),
        Output("summary.json", "file", *unless_seeded(covered_unless(
            hidden_accuracy + timing, "the settings, the headline, the privacy results, the "
            "last round's accuracies and provenance (versions, platform, threads, the config's "
            "digest)"))),
        Output("accuracy.png", "file", *covered_unless(hidden_accuracy, "accuracy per round")),
    ]
    shown_health = [name for name in (health or ()) if name in uncovered]
    report = unless_seeded(covered_unless(
        hidden_accuracy + timing[:1] + shown_health,
        "the headline, the card, the privacy results, the final accuracies, provenance"))
    files += [Output("report.md", "file", *report), Output("report.html", "file", *report)]
    if health is not None:
        files.append(Output("health.png", "file", *covered_unless(
            shown_health, "health signals per round (training loss, clipped fraction, ...)")))
    if ledger:
        files.append(Output("ledger.jsonl", "file", *unless_seeded(covered_unless(
            uncovered if not guarantee_only else [], "the release ledger: the settings fixed "
            "at creation, every row metrics.jsonl showed, every headline and the digests of "
            "the files written"))))
    if redrawn:
        files.append(Output("redrawn.jsonl", "file", *covered_unless(
            uncovered if not guarantee_only else [], "the first rows of rounds released twice "
            "(a secure run resumed after they were logged; composed by the accountant)")))
    if model_file:
        files.append(Output("model.pt", "file", True, "the final released model (for "
                            "algorithms that release every round: the last global model)"))
    where = private + "/" if guarantee_only else ""
    if checkpoints:
        files.append(Output(f"{where}checkpoints/", "file", *PRIVATE_STATE))
    if client_state:
        files.append(Output(f"{where}client-state/", "file", *PRIVATE_STATE))
    if tensorboard:
        files.append(Output(f"{where}tensorboard/", "file", False,
                            "every metrics key of every round, covered or not"))
    if mlflow:  # the store gets the settings, the metrics and the run directory's files
        files.append(Output("mlflow (run.mlflow store)", "file", *(unless_seeded((
            True, "the settings, the covered metrics of every round, the labelled privacy "
            "results and the run directory's files (only covered ones: the rest is in "
            f"{private}/)")) if guarantee_only else (
            False, "every metrics key of every round, covered or not, and the run "
            "directory's files, checkpoints (the private state) included"))))
    if guarantee_only and uncovered:
        files.append(Output(f"{private}/metrics.jsonl", "file", False,
                            f"the metrics outside the guarantee ({', '.join(uncovered)})"))
    return files


#: files every run may publish that say nothing worth listing (no data)
_TRIVIAL_FILES = (".lock", "run.json")


def publishable_line(outputs: Iterable[Mapping[str, Any]], accuracy_keys: Iterable[str]) -> str:
    """One sentence naming what may be published with the printed guarantee: the covered
    files (``run.json`` and ``.lock``, which hold no data, left out) and the covered
    accuracies among ``accuracy_keys``; the rest is outside, as privacy.json's ``outputs``
    says. ``outputs``: the run's classified outputs (:meth:`Output.to_dict` rows)."""
    rows = list(outputs)
    for row in rows:
        if not isinstance(row, Mapping) or not {"name", "kind", "covered"} <= set(row):
            raise ValueError(f"outputs holds {row!r}: each must be a mapping with name, kind and "
                             "covered (Output.to_dict)")
    covered = {row["name"] for row in rows if row["covered"]}
    files = [row["name"] for row in rows if row["kind"] == "file" and row["covered"]
             and row["name"] not in _TRIVIAL_FILES]
    accuracies = [key.removesuffix("_accuracy").replace("_", " ") for key in accuracy_keys
                  if key in covered]
    parts = [*files, *([f"the accuracies ({', '.join(accuracies)})"] if accuracies else [])]
    if not parts:
        return ("publish nothing of this run with the guarantee: no output is covered "
                "(privacy.json outputs say why)")
    outside = sum(1 for row in rows if not row["covered"])
    listed = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
    return (f"may be published with the guarantee: {listed}"
            + (f"; {outside} other outputs may not (privacy.json outputs say which and why)"
               if outside else ""))
