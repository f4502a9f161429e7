"""The schema of a ``privfl run`` configuration (pydantic, every section closed to unknown keys).

A configuration has nine sections; every key has a default, so ``{}`` is a valid (demo-like)
configuration. See ``docs/run.md`` for the reference with examples.

``data``        which dataset and how it is split across clients
``model``       which architecture (:func:`privfl.models.build_model`) and its keyword arguments
``training``    local training of a client in one round (:class:`privfl.fl.LocalTrainingSpec`)
``privacy``     clipping, noise, delta, accountants; ``enabled: false`` for non-private baselines
``federated``   the algorithm (``federated.algorithm``, see :mod:`privfl.algorithms.registry`)
                and its settings: rounds, client sampling, server step, ...
``stop``        optional early stops: a privacy budget, a target accuracy
``run``         execution only (device, threads, checkpoints); never changes the result
``attack``      optional simulated poisoning attack (Xie et al. 2023), off by default
``protection``  optional client-side distortion of every upload (Zhang, Chen and Yang 2022;
                :mod:`privfl.config.protection`), off by default; not a DP guarantee

Privacy-relevant numbers (``training.batch_size``, ``training.local_steps``,
``training.sampling``, ``privacy.clip_norm``, ``privacy.sigma`` / ``privacy.noise_multiplier``)
appear exactly once here; the algorithm builds ONE privacy plan from them
(:class:`~privfl.algorithms.base.PrivacyPlan`) and both the trainer and the accountant read it.
"""

from __future__ import annotations

import types
import typing
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationInfo,
    field_validator,
    model_validator,
)

from privfl.accounting.registry import is_bound
from privfl.attacks.config import AttackConfig
from privfl.config.datasets import CUSTOM, dataset_names
from privfl.config.model_names import current_model_name
from privfl.config.protection import ProtectionConfig
from privfl.config.sections import federated_model

__all__ = [
    "DATASET_NAMES",
    "DataConfig",
    "ExperimentConfig",
    "FederatedConfig",
    "ModelConfig",
    "PrivacyConfig",
    "RunConfig",
    "StopConfig",
    "TrainingConfig",
]

#: Datasets ``data.dataset`` accepts (loaders in :mod:`privfl.data`).
DATASET_NAMES = dataset_names()  #: the built-in datasets (privfl.config.datasets)
SINGLE_SPLIT = ("mnist-5k", "digits", "synthetic")


def _takes_numbers(annotation: Any) -> bool:
    """True for ``int``, ``float``, ``int | None``, ``list[int]`` (and unions of those, unless
    they take ``bool`` too): counts, sizes, rates, where a YAML ``true`` would otherwise pass as
    1."""
    if annotation in (int, float):
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list):
        args = typing.get_args(annotation)
        return bool not in args and any(_takes_numbers(arg) for arg in args)
    return False


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """Strict numbers: ``rounds: true`` is refused, not run as 1 round."""
        items = value if isinstance(value, list) else [value]
        if any(isinstance(v, bool) for v in items) and _takes_numbers(
                cls.model_fields[info.field_name].annotation):
            raise ValueError("must be a number, not a boolean")
        return value


#: data.flwr.partitioner: Flower Datasets' partitioners (privfl.data.flower_datasets)
FLWR_PARTITIONER_NAMES = ("iid", "dirichlet", "shard", "natural-id", "pathological", "linear",
                          "square", "exponential")


class FlwrDatasetsConfig(_Section):
    """``data.source: flwr-datasets``: a dataset and a partitioner of Flower Datasets."""

    dataset: str | None = Field(
        None, description="a Hugging Face dataset name, or a local builder (parquet, csv, "
        "json) with data_files")
    subset: str | None = Field(None, description="the dataset's configuration (subset) name")
    data_files: dict[str, str] | None = Field(
        None, description="local builders: split name -> file, e.g. {train: a.parquet, "
        "test: b.parquet}")
    partitioner: Literal[FLWR_PARTITIONER_NAMES] = Field(  # type: ignore[valid-type]
        "iid", description="Flower's partitioner of the training split (num_partitions: "
        "data.clients; partition_by: label; seed: the run's)")
    partitioner_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="more keyword arguments of the partitioner class, "
        "e.g. {alpha: 0.5} for dirichlet, {partition_by: writer_id} for natural-id")
    input: str = Field("image", description="the column of inputs (images or numbers)")
    label: str = Field("label", description="the column of integer labels")
    train_split: str = "train"
    test_split: str = "test"


class DataConfig(_Section):
    """Dataset and partition across clients."""

    @field_validator("classes")
    @classmethod
    def _distinct(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and (len(value) < 2 or len(set(value)) != len(value)
                                  or min(value) < 0):
            raise ValueError("must be at least two distinct class indices >= 0")
        return value

    dataset: str = Field(
        "mnist-5k", description="a registered dataset (privfl list datasets), or custom: a "
        "FederatedDataset given from Python (Experiment.create(config, dir, data=...); "
        "docs/python-api.md)")

    @field_validator("dataset")
    @classmethod
    def _registered_dataset(cls, value: str) -> str:
        if value != CUSTOM and value not in dataset_names():
            raise ValueError(f"must be one of {', '.join((*dataset_names(), CUSTOM))}")
        return value
    root: str | None = Field(
        None, description="folder holding the dataset files (default: privfl's data home)"
    )
    download: bool = Field(False, description="download mnist / cifar10 if missing")
    normalize: bool = Field(True, description="standardise inputs with the dataset's mean/std")
    test_fraction: float = Field(
        0.2, gt=0, lt=1, description="test share for single-split sources (mnist-5k, digits)"
    )
    synthetic_examples: int = Field(2000, ge=2, description="size of the synthetic dataset")
    classes: list[int] | None = Field(
        None, description="keep only these classes, relabelled 0..k-1 in the order given "
        "(e.g. [0, 1]: a binary 0-vs-1 task); null keeps every class",
    )
    partition: Literal["shards", "dirichlet", "dirichlet-classes", "iid", "leaf-synthetic",
                       "natural"] = Field(
        "shards", description="how records are split across clients: shards (each client "
        "gets shards_per_client label-sorted shards: non-IID), dirichlet (each client's label "
        "proportions drawn from Dirichlet(beta), train_size each; Zheng et al. 2021's CIFAR "
        "split), dirichlet-classes (each class's records spread over the clients by "
        "Dirichlet(beta), at least 2 per class each: unequal sizes; Xie et al. 2023's split), "
        "iid (uniformly at random, train_size each), "
        "leaf-synthetic (a LEAF-style population of many small clients of log-normal sizes "
        "with mean train_size, default 8, at least training.batch_size each, over one shared "
        "pool; records are shared once the population needs more than the dataset holds), "
        "natural (the data's own users, one client each, with their own train and test "
        "records: femnist, shakespeare, sent140; their default)")
    clients: int = Field(20, ge=2, description="m: number of clients")
    shards_per_client: int = Field(2, ge=1, description="shards: shards per client")
    shard_size: int | None = Field(None, ge=1, description="shards: records per shard")
    train_size: int | None = Field(
        None, ge=1, description="dirichlet / iid: training records per client; "
        "leaf-synthetic: their mean"
    )
    test_size: int | None = Field(
        100, ge=0, description="test records per client (iid: null = equal split of the pool)"
    )
    test_replace: bool = Field(True, description="shards: draw test records with replacement")
    client_test: Literal["train-labels", "seed-labels"] = Field(
        "train-labels", description="shards: how each client's test records are chosen from the "
        "held-out test set: train-labels (Zheng et al. 2021's reference code: the labels of the "
        "client's training records; accuracies on them read private data and are outside the "
        "guarantee) or seed-labels (the labels its shards would hold if every class had as "
        "many records: fixed by the seed, reading no training record; accuracies on them are "
        "covered)")
    beta: float = Field(0.5, gt=0, description="dirichlet, dirichlet-classes: concentration "
                        "(smaller: more heterogeneous)")
    disjoint: bool = Field(
        True, description="dirichlet: no record shared between clients (the default: what "
        "record-level guarantees assume); false: clients sample from the whole pool (Zheng et "
        "al. 2021's reference code), a record held by k clients is accounted as the "
        "composition of its holders (DP-DSGD refuses it)")
    test_sampling: Literal["proportions", "train-labels"] = "proportions"
    users: int | None = Field(
        None, ge=1, description="natural: keep the first this many users with training "
        "records, in the files' order (default: every user; data.clients applies to the other "
        "partitions)")
    vocabulary: str | None = Field(
        None, description="sent140, shakespeare: the token vocabulary, a public word list or "
        "GloVe text file (PATH; its first field per line), or training-split (built from the "
        "private training split: the privacy card says the guarantee does not cover it). "
        "Default: LEAF's 80 characters for shakespeare; sent140 needs one")
    vocabulary_size: int | None = Field(
        None, ge=1, description="sent140, shakespeare: keep the first this many tokens of "
        "data.vocabulary (GloVe lists words by frequency)")
    seq_len: int | None = Field(
        None, ge=1, description="sent140: words per tweet (default 25, LEAF's); shakespeare: "
        "characters per input (default 80)")
    emnist_split: Literal["byclass", "bymerge", "balanced", "letters", "digits", "mnist"] = Field(
        "byclass", description="emnist: which EMNIST split (Hasircioglu and Gunduz 2022: "
        "byclass, 62 classes)")

    source: Literal["privfl", "flwr-datasets"] = Field(
        "privfl", description="privfl: data.dataset; flwr-datasets: Flower Datasets' "
        "data.flwr.dataset split by data.flwr.partitioner (the flwr-datasets extra)")
    flwr: FlwrDatasetsConfig = Field(default_factory=FlwrDatasetsConfig)

    def _keys_for_their_datasets(self) -> None:
        """Refuse a dataset-specific key set for a dataset that does not read it."""
        text = ("sent140", "shakespeare")
        checks = [(key, getattr(self, key) is not None, text)
                  for key in ("vocabulary", "vocabulary_size", "seq_len")]
        checks += [("users", self.users is not None, ("femnist", *text)),
                   ("emnist_split", self.emnist_split != "byclass", ("emnist",)),
                   ("flwr.dataset", self.flwr.dataset is not None, ("flwr-datasets",))]
        for key, given, datasets in checks:
            if given and self.dataset not in datasets:
                raise ValueError(f"data.{key} is not allowed for data.dataset = "
                                 f"{self.dataset!r}: it applies to {', '.join(datasets)}")

    @model_validator(mode="after")
    def _natural_users(self) -> DataConfig:
        """data.source: flwr-datasets is the dataset ``flwr-datasets``; a dataset of natural
        users (or Flower's partitions) is partitioned by its users unless the configuration says
        otherwise; data.partition: natural needs such a dataset."""
        from privfl.config.datasets import dataset_entry

        flower = "flwr-datasets"
        if self.source == flower and self.dataset != flower:
            if "dataset" in self.model_fields_set:
                raise ValueError(f"data.dataset = {self.dataset!r} is not allowed with "
                                 f"data.source: {flower}: the data are data.flwr.dataset")
            self.dataset = flower
        if self.dataset == flower:
            self.source = flower
        self._keys_for_their_datasets()
        natural = self.dataset != CUSTOM and dataset_entry(self.dataset).natural
        if natural and "partition" not in self.model_fields_set:
            self.partition = "natural"
        if self.partition == "natural" and not natural:
            raise ValueError(
                f"data.partition = 'natural' is not allowed for data.dataset = "
                f"{self.dataset!r}: its records have no users; natural needs one of "
                f"{', '.join(n for n in dataset_names() if dataset_entry(n).natural)}")
        return self

    @model_validator(mode="after")
    def _dirichlet_classes_keys(self) -> DataConfig:
        """Keys of the other partitions that dirichlet-classes would ignore are refused: its
        clients' sizes follow the draw, its clients are disjoint, its test sets IID."""
        if self.partition != "dirichlet-classes":
            return self
        given = {"train_size": self.train_size is not None, "disjoint": not self.disjoint,
                 "test_sampling": self.test_sampling != "proportions"}
        for key, ignored in given.items():
            if key in self.model_fields_set and ignored:
                raise ValueError(
                    f"data.{key} = {getattr(self, key)!r} is not allowed with data.partition: "
                    "dirichlet-classes (Xie et al. 2023's split: each class spread over the "
                    "clients by Dirichlet(data.beta), so sizes follow the draw, clients are "
                    "disjoint and test sets IID)")
        return self


class ModelConfig(_Section):
    """An architecture from :mod:`privfl.models` (``num_classes``/``input_shape`` filled in)."""

    name: str = "mlp"
    kwargs: dict[str, Any] = Field(default_factory=dict)
    embeddings: str | None = Field(
        None, description="GloVe text file for a text model's Embedding (public vectors)")
    freeze_embeddings: bool | None = Field(
        None, description="keep the embedding fixed (no gradient, not in any update); "
        "default: frozen when read from model.embeddings")
    init_from: str | None = Field(
        None, description="state dict (.pt) the model starts from; the guarantee covers the "
        "federated data only, so the pretraining data must be public")
    replace_head: bool = Field(
        False, description="with init_from: start the output layer fresh (another class count)")

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        # names known without torch (privfl.config.model_names); a deprecated alias is stored
        # as its current name
        return current_model_name(value)

    @field_validator("embeddings", "init_from")
    @classmethod
    def _a_path(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a file path, not empty")
        return value

    @model_validator(mode="after")
    def _head_needs_a_start(self) -> ModelConfig:
        if self.replace_head and self.init_from is None:
            raise ValueError("model.replace_head = true needs model.init_from (a pretrained "
                             "model whose head it replaces)")
        return self


class TrainingConfig(_Section):
    """Local training of one client in one round (Zheng et al. 2021, Algorithm 2)."""

    local_steps: int = Field(12, ge=1, description="K: local steps per round")
    batch_size: int = Field(16, ge=1, description="B: local batch size")
    sampling: Literal["without-replacement", "poisson"] = "without-replacement"
    optimizer: Literal["sgd", "momentum", "adam"] = "adam"
    lr: float = Field(0.005, gt=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = Field(1e-8, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    lr_decay_every: int | None = Field(
        None, ge=1, description="multiply lr by lr_decay_gamma every this many participations"
    )
    lr_decay_gamma: float = Field(1.0, gt=0, le=1)

    @field_validator("betas")
    @classmethod
    def _betas(cls, value: tuple[float, float]) -> tuple[float, float]:
        for beta in value:
            if not 0 <= beta < 1:
                raise ValueError("each beta must be in [0, 1)")
        return value


#: the smallest noise multiplier z (sigma: half of it): below it the privacy loss (of order
#: 1/z^2 per step) overflows the accountants' floating point; a run without noise sets
#: privacy.enabled: false
MIN_NOISE_MULTIPLIER = 1e-100


class PrivacyConfig(_Section):
    """Clipping, noise, delta and accountants; what they protect (a record or a client) and which
    accountants apply is the algorithm's (``federated.algorithm``)."""

    @field_validator("sigma", "noise_multiplier")
    @classmethod
    def _noise_in_range(cls, value: float | None, info: ValidationInfo) -> float | None:
        floor = MIN_NOISE_MULTIPLIER / (2 if info.field_name == "sigma" else 1)
        if value is not None and not value >= floor:
            raise ValueError(
                f"out of range: must be >= {floor:g} (below it the privacy loss overflows "
                "every accountant; for a run without noise set privacy.enabled: false)")
        return value

    enabled: bool = Field(True, description="false: no clipping, no noise (baseline)")
    sigma: float | None = Field(
        None, description="PriFedSync only (Zheng et al. 2021's convention): noise std / (2C) "
        "on the sum (z = 2 sigma); default 1",
    )
    noise_multiplier: float | None = Field(
        None, description="z: noise std / C on the sum (Opacus convention)"
    )
    clip_norm: float = Field(1.0, gt=0, description="C: L2 clip norm (per example or per "
                             "client update, as the algorithm says)")
    delta: float = Field(1e-5, gt=0, lt=1)
    epsilon_budget: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="E: a privacy budget at privacy.delta fixed when the run is created; a "
        "privacy filter (Rényi or Gaussian-DP) stops the run before a round would pass it, "
        "however often it is extended or its stops changed after reading its results "
        "(docs/run.md, Budget; DP-FedAvg, InsDP, DP-FTRL, unsampled BandMF)")
    accountants: list[str] | None = Field(
        None, description="accountants to report (default and choices: the algorithm's)"
    )
    full_accounting_every: int | None = Field(
        None, ge=1, le=1_000_000,
        description="k: the metrics rows of every k-th round (and of the last planned round) "
        "carry every accountant; the others leave out what is recomputed from scratch each "
        "round (the sampled PLD, basic compositions). Default: the last round only; 1: every "
        "round (a PLD composition per round)",
    )
    secure: bool = Field(
        False,
        description="secure mode: noise, local batches and client sampling from os.urandom "
        "(production; not reproducible)",
    )
    secure_noise: bool | None = Field(
        None, exclude=True,
        description="deprecated alias of secure (same meaning); config.yaml records secure",
    )

    @model_validator(mode="after")
    def _secure_alias(self) -> PrivacyConfig:
        if self.secure_noise is not None:
            if "secure" in self.model_fields_set and self.secure != self.secure_noise:
                raise ValueError(
                    f"privacy.secure = {str(self.secure).lower()} and privacy.secure_noise = "
                    f"{str(self.secure_noise).lower()} disagree: privacy.secure_noise is a "
                    "deprecated alias of privacy.secure; give only privacy.secure"
                )
            self.secure = self.secure_noise
            self.secure_noise = None
        return self

    @model_validator(mode="after")
    def _budget(self) -> PrivacyConfig:
        if self.epsilon_budget is not None and not self.enabled:
            raise ValueError(
                f"privacy.epsilon_budget = {self.epsilon_budget:g} is not allowed with "
                "privacy.enabled: false: a non-private run has no privacy budget")
        return self

    @model_validator(mode="after")
    def _noise(self) -> PrivacyConfig:
        if self.enabled and self.sigma is not None and self.noise_multiplier is not None:
            raise ValueError(
                "privacy.sigma and privacy.noise_multiplier: both given; with "
                "privacy.enabled give exactly one (noise_multiplier = 2 * sigma)"
            )
        return self

    @property
    def z(self) -> float:
        """The noise multiplier (0 when disabled; ``2 * sigma`` when only sigma is given)."""
        if not self.enabled:
            return 0.0
        if self.noise_multiplier is not None:
            return self.noise_multiplier
        return 2.0 * self.sigma if self.sigma is not None else 0.0


class FederatedConfig(_Section):
    """The ``federated`` section: keys common to every algorithm. Each algorithm extends it
    (its ``config_class``) and :meth:`check` refuses combinations it cannot run or account."""

    algorithm: str = "prifedsync"
    rounds: int = Field(
        30, ge=1, le=1_000_000,
        description="R: rounds (at most 10^6: one metrics row and one checkpoint cycle each)",
    )

    #: accountants only this algorithm's plan answers (methods of a node accountant)
    OWN_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ()
    #: whether the plan's events are compositions of noisy steps, which every registered step
    #: accountant answers (privfl.accounting.registry), except UNSUPPORTED_STEP_ACCOUNTANTS
    STEP_ACCOUNTANTS: ClassVar[bool] = True
    UNSUPPORTED_STEP_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ()
    #: privacy.accountants when the configuration names none
    DEFAULT_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("pld",)
    #: whether privacy.sigma (Zheng et al. 2021's noise std / 2C) is accepted
    PAPER_SIGMA: ClassVar[bool] = False
    #: accuracy metrics that stop.target_metric may name (without "_accuracy")
    TARGET_METRICS: ClassVar[tuple[str, ...]] = ("global",)
    #: attack.kind values the algorithm runs and reports (privfl.attacks.config)
    ATTACKS: ClassVar[tuple[str, ...]] = ()

    def check(self, config: ExperimentConfig) -> None:
        """Refuse settings of other sections that this algorithm cannot honour (ValueError)."""

    @classmethod
    def accountants(cls) -> tuple[str, ...]:
        """The names ``privacy.accountants`` may hold: the algorithm's own methods, then each
        registered step accountant its plan's events take (read from the registry, so an
        accountant registered at run time is accepted where it applies)."""
        from privfl.accounting.registry import registered

        steps = registered(nodes=False) if cls.STEP_ACCOUNTANTS else ()
        return tuple(dict.fromkeys((*cls.OWN_ACCOUNTANTS, *(
            n for n in steps if n not in cls.UNSUPPORTED_STEP_ACCOUNTANTS))))


class StopConfig(_Section):
    """Optional stops: before a round that would exceed a budget, after a target accuracy."""

    epsilon: float | None = Field(
        None, gt=0, description="budget on epsilon at privacy.delta (pld bound if computed)"
    )
    mu: float | None = Field(
        None, gt=0, description="budget on a Gaussian-DP mu (a gdp-clt estimate, e.g. Theorem 2's "
        "mu_max of PriFedSync)")
    target_accuracy: float | None = Field(None, gt=0, le=1)
    target_metric: str | None = Field(
        None, description="accuracy metric of the target (the algorithm's: "
        "personalised (default) or global for PriFedSync, global for the others)")


class RunConfig(_Section):
    """Execution settings; none of them changes the result of a run."""

    device: str = Field("cpu", description="cpu, cuda, cuda:N or mps")
    threads: int | None = Field(
        None, ge=1, le=1024,
        description="clients trained at once, each on one torch thread (default: the cores "
        "this process may use); the result is bit-identical for every value",
    )
    checkpoint_every: int = Field(1, ge=1)
    keep_checkpoints: int = Field(
        1, ge=1, description="newest checkpoints kept: a resume needs only the last (an older "
        "one is deleted only after the new one and its digest record are on disk; keep 2 for a "
        "fallback if the newest is damaged later)")
    max_rounds: int | None = Field(
        None, ge=1, description="rounds to run in this invocation, then stop (resume later)"
    )
    eval_batch_size: int = Field(1000, ge=1)
    memory_budget: int | str | None = Field(
        None, description="bytes a round's cohort may hold at once (an int, or a size such as "
        "'2GiB'); algorithms whose clients keep no state between rounds train the cohort in "
        "chunks that fit it; default: a quarter of the free memory, at most 1 GiB; the result "
        "is bit-identical for every value")
    tensorboard: bool = Field(False, description="also log each round's metrics as TensorBoard "
                              "event files in DIR/tensorboard (pip install 'privfl[tensorboard]')")
    mlflow: bool | str = Field(
        False, description="also track the run in MLflow: true (a file store DIR/../mlruns, "
        "works offline) or a tracking URI; parameters, per-round metrics, the labelled privacy "
        "results and the run directory as artifacts (pip install 'privfl[mlflow]')")
    outputs: Literal["all", "guarantee-only"] = Field(
        "all", description="all: every output in the run directory, each classified in "
        "privacy.json's outputs; guarantee-only: only what the printed guarantee covers, the "
        "rest (checkpoints, metrics outside the guarantee, TensorBoard logs) in DIR.private "
        "beside it (needs privacy.secure: a seeded config.yaml regenerates the noise)")

    @field_validator("memory_budget")
    @classmethod
    def _memory_budget(cls, value: int | str | None) -> int | None:
        """Bytes, at least 1 MiB (a size string is converted)."""
        if value is None:
            return None
        from privfl._memory import parse_memory_budget

        return parse_memory_budget(value, "run.memory_budget")

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        """``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (whether this machine has it is checked
        when a run starts, so other machines can still read the configuration)."""
        import re

        if not re.fullmatch(r"cpu|mps|cuda(:\d{1,3})?", value):
            raise ValueError("must be 'cpu', 'cuda', 'cuda:N' or 'mps'")
        return value


class ExperimentConfig(_Section):
    """A complete ``privfl run`` configuration."""

    name: str = "run"
    description: str = ""
    seed: int = Field(0, ge=0, le=2**64 - 1)  # what torch.Generator.manual_seed takes
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)
    federated: SerializeAsAny[FederatedConfig] = Field(default_factory=lambda: _federated({}))
    stop: StopConfig = Field(default_factory=StopConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    attack: AttackConfig = Field(default_factory=AttackConfig)
    protection: ProtectionConfig = Field(default_factory=ProtectionConfig)

    @field_validator("federated", mode="wrap")
    @classmethod
    def _algorithm_section(cls, value: Any, handler: Any, info: ValidationInfo) -> Any:
        if isinstance(value, FederatedConfig):
            return value
        return _federated(value)

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentConfig:
        fed, privacy = self.federated, self.privacy
        allowed = fed.accountants()
        if privacy.accountants is None:
            privacy.accountants = list(fed.DEFAULT_ACCOUNTANTS)
        elif privacy.enabled and not privacy.accountants:
            raise ValueError(f"privacy.accountants = [] must name at least one of "
                             f"{', '.join(allowed)}")
        for name in privacy.accountants:
            if name not in allowed:
                raise ValueError(
                    f"privacy.accountants = {privacy.accountants!r} is not allowed for "
                    f"federated.algorithm = {fed.algorithm!r}: each must be one of "
                    f"{', '.join(allowed)}"
                )
        if not privacy.enabled and (self.stop.epsilon is not None or self.stop.mu is not None):
            raise ValueError(
                "stop.epsilon / stop.mu need privacy.enabled: a non-private run has no budget"
            )
        if self.stop.epsilon is not None and not any(map(is_bound, privacy.accountants)):
            bounds = [n for n in allowed if is_bound(n)]
            raise ValueError(
                "stop.epsilon needs a bound accountant in privacy.accountants (one of "
                f"{', '.join(bounds)})"
            )
        if self.stop.mu is not None and "gdp-clt" not in privacy.accountants:
            raise ValueError("stop.mu needs gdp-clt in privacy.accountants")
        if self.stop.target_metric is None:
            self.stop.target_metric = fed.TARGET_METRICS[0]
        if self.stop.target_metric not in fed.TARGET_METRICS:
            raise ValueError(
                f"stop.target_metric = {self.stop.target_metric!r} is not allowed for "
                f"federated.algorithm = {fed.algorithm!r}: must be one of "
                f"{', '.join(fed.TARGET_METRICS)}"
            )
        if privacy.enabled and privacy.sigma is not None and not fed.PAPER_SIGMA:
            raise ValueError(
                f"privacy.sigma = {privacy.sigma!r} is not allowed for federated.algorithm = "
                f"{fed.algorithm!r}: sigma (noise std / 2C) is Zheng et al. 2021's convention for "
                "PriFedSync; give privacy.noise_multiplier (z = noise std / C) instead"
            )
        fed.check(self)
        self.attack.check(self.data, fed)
        self.protection.check(privacy, fed.algorithm)
        if privacy.enabled and privacy.sigma is None and privacy.noise_multiplier is None:
            raise ValueError(
                f"privacy.noise_multiplier is missing: federated.algorithm = {fed.algorithm!r} "
                "with privacy.enabled needs the noise multiplier z (noise std / C), or set "
                "privacy.enabled: false for a non-private baseline"
            )
        return self


def _federated(value: Any) -> FederatedConfig:
    """Validate a ``federated`` mapping with the model of the algorithm it names."""
    if not isinstance(value, dict):
        raise ValueError("must be a mapping (a section of keys)")
    name = value.get("algorithm", "prifedsync")
    try:
        cls = federated_model(name)
    except (ValueError, ImportError) as error:
        raise ValueError(str(error)) from None
    return cls.model_validate(value)
