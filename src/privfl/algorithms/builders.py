"""Build the parts every algorithm shares from a configuration: data, model, local training.

:func:`build_dataset` (deterministic in ``config.seed``), :func:`build_model` (initialised from
``config.seed``) and :func:`build_spec` (THE :class:`~privfl.fl.LocalTrainingSpec` of a run whose
clients train locally: the trainer and the accountant both read it) and
:func:`trainer_options` (execution settings of the engine, which never change a result);
:func:`build_algorithm` and :func:`privacy_plan` (the algorithm ``federated.algorithm`` names, or
its privacy plan alone, from :mod:`~privfl.algorithms.registry`).
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import torch
from torch import nn

from privfl.algorithms.protection import attach_protection
from privfl.algorithms.registry import algorithm_class
from privfl.config import ConfigError, ExperimentConfig
from privfl.config.datasets import dataset_entry
from privfl.data.datasets import FederatedDataset
from privfl.data.errors import DataFormatError
from privfl.fl.spec import LocalTrainingSpec

__all__ = ["apply_attack", "build_algorithm", "build_dataset", "build_model", "build_spec",
           "privacy_plan", "trainer_options"]

#: leaf-synthetic: mean records per client when data.train_size is not set
LEAF_MEAN_SIZE = 8


def build_dataset(config: ExperimentConfig) -> FederatedDataset:
    """The federated dataset the configuration describes (deterministic in ``config.seed``);
    with an ``attack`` section, the attackers' records are poisoned (:func:`apply_attack`)."""
    return apply_attack(config, _clean_dataset(config))


def apply_attack(config: ExperimentConfig, data: FederatedDataset) -> FederatedDataset:
    """``data`` poisoned as ``config.attack`` says (:func:`privfl.attacks.poisoning.poison`,
    attackers drawn from ``config.seed``), or ``data`` itself when ``attack.kind`` is none."""
    if not config.attack.active:
        return data
    from privfl.attacks.poisoning import poison

    try:
        return poison(data, config.attack, config.seed)[0]
    except ValueError as error:
        raise ConfigError(str(error)) from None


def _clean_dataset(config: ExperimentConfig) -> FederatedDataset:
    """The federated dataset of the ``data`` section, before any attack."""
    from privfl import data as d

    c, seed = config.data, config.seed
    if c.dataset == "custom":
        raise ConfigError("data.dataset = 'custom': the data come from Python; pass the same "
                          "FederatedDataset as data= to Experiment.create / Experiment.resume "
                          "(docs/python-api.md)")
    try:
        loaded = dataset_entry(c.dataset).load()(c, seed)  # privfl.config.datasets
    except d.DatasetNotFoundError as error:  # said in configuration keys, not Python calls
        if not error.settings:
            raise
        raise d.DatasetNotFoundError(error.settings) from None
    if isinstance(loaded, FederatedDataset):  # natural users (privfl.data.natural)
        if c.classes is not None:
            raise ConfigError(f"data.classes = {list(c.classes)!r} is not allowed for "
                              f"data.dataset = {c.dataset!r}: its users' records are kept whole")
        if c.partition == "natural":
            return loaded
        loaded = (loaded.train, loaded.test)  # the pooled records, split by data.partition
    train, test = loaded
    if c.classes is not None:  # e.g. a binary task (Xie et al. 2023: MNIST 0 vs 1)
        try:
            train, test = train.filter_classes(c.classes), test.filter_classes(c.classes)
        except ValueError as error:
            raise ConfigError(f"data.classes = {list(c.classes)!r} is not valid for "
                              f"data.dataset = {c.dataset!r}: {error}") from None
    if c.partition == "shards":
        return d.federate_shards(
            train, test, num_clients=c.clients, shards_per_client=c.shards_per_client,
            shard_size=c.shard_size, test_size=200 if c.test_size is None else c.test_size,
            test_replace=c.test_replace, client_test=c.client_test, seed=seed,
        )
    if c.partition == "dirichlet":
        size = 500 if c.train_size is None else c.train_size
        if c.disjoint and size * c.clients > len(train):
            raise ConfigError(
                f"data.train_size = {size} is out of range: data.clients = {c.clients} disjoint "
                f"clients need {size * c.clients} records, only {len(train)} available; lower "
                "data.train_size or data.clients, or set data.disjoint: false (clients share "
                "records, which record-level guarantees then compose)")
        return d.federate_dirichlet(
            train, test, num_clients=c.clients, train_size=size,
            test_size=200 if c.test_size is None else c.test_size, beta=c.beta,
            disjoint=c.disjoint, test_sampling=c.test_sampling, seed=seed,
        )
    if c.partition == "dirichlet-classes":
        try:
            return d.federate_dirichlet_classes(train, test, num_clients=c.clients, alpha=c.beta,
                                                test_size=c.test_size, seed=seed)
        except ValueError as error:  # a class with fewer than 2 records per client
            raise ConfigError(f"data.partition = 'dirichlet-classes' with data.clients = "
                              f"{c.clients}: {error}") from None
    if c.partition == "leaf-synthetic":  # many small unequal clients (privfl.data.population)
        from privfl.data.population import federate_leaf_synthetic

        return federate_leaf_synthetic(
            train, test, num_clients=c.clients,
            mean_size=LEAF_MEAN_SIZE if c.train_size is None else c.train_size,
            min_size=min(config.training.batch_size, len(train)),
            test_size=c.test_size or 0, seed=seed)
    return d.federate_iid(train, test, num_clients=c.clients, size=c.train_size,
                          test_size=c.test_size, seed=seed)


def build_model(config: ExperimentConfig, data: FederatedDataset) -> nn.Module:
    """The configured architecture, initialised from ``config.seed``; ``num_classes`` and
    ``input_shape`` come from the data unless given in ``model.kwargs``."""
    from privfl.models import MODELS
    from privfl.models import build_model as _build

    cls, _ = MODELS[config.model.name]
    accepted = inspect.signature(cls).parameters
    kwargs = dict(config.model.kwargs)
    if "num_classes" in accepted:
        kwargs.setdefault("num_classes", data.num_classes)
    if "input_shape" in accepted:
        kwargs.setdefault("input_shape", data.input_shape)
    kwargs.update(_text_kwargs(config, data, accepted))
    with torch.random.fork_rng(devices=[]):
        _check_model_memory(config, _build, {k: v for k, v in kwargs.items()
                                             if k != "embeddings"})
        torch.manual_seed(config.seed)
        try:
            model = _build(config.model.name, **kwargs)
        except (DataFormatError, OSError) as error:  # the GloVe file of model.embeddings
            raise ConfigError(f"model.embeddings = {config.model.embeddings!r}: {error}"
                              ) from None
        except (TypeError, ValueError) as error:
            raise ConfigError(
                f"model.kwargs = {dict(config.model.kwargs)!r} is not valid for model "
                f"{config.model.name!r}: {error}"
            ) from None
    if config.model.init_from is not None:
        from privfl.models.pretrained import load_pretrained

        try:
            model.pretrained = load_pretrained(model, config.model.init_from,
                                               replace_head=config.model.replace_head)
        except (OSError, ValueError) as error:
            raise ConfigError(str(error)) from None
    expected = getattr(model, "input_shape", None)
    if expected is not None and len(expected) == 3 and len(data.input_shape) != 3 \
            and "input_shape" not in accepted:
        raise ConfigError(
            f"model.name = {config.model.name!r} is a network for images of shape "
            f"{tuple(expected)} (C, H, W): the data (data.dataset = {config.data.dataset!r}) have "
            f"inputs of shape {tuple(data.input_shape)}, not images; for N x D (tabular) data "
            "use model.name: mlp or logreg (or your own model, privfl.models.register_model)")
    if expected is not None and tuple(expected) != tuple(data.input_shape):
        raise ConfigError(
            f"model.name = {config.model.name!r} takes inputs of shape {tuple(expected)}: "
            f"data.dataset = {config.data.dataset!r} has {tuple(data.input_shape)}"
        )
    return model


def _text_kwargs(config: ExperimentConfig, data: FederatedDataset, accepted) -> dict:
    """A text model's ``vocabulary`` (the pooled train split's, ``Dataset.vocabulary``) and
    ``model.embeddings`` / ``model.freeze_embeddings``; refused for a model without them."""
    kwargs = {}
    if "vocabulary" in accepted and "vocabulary" not in config.model.kwargs:
        vocabulary = getattr(data.train, "vocabulary", None)
        if vocabulary is None:
            raise ConfigError(
                f"model.name = {config.model.name!r} is a text model: data.dataset = "
                f"{config.data.dataset!r} has no vocabulary (token-id data such as sent140 or "
                "shakespeare carry one)")
        kwargs["vocabulary"] = vocabulary
    for key in ("embeddings", "freeze_embeddings"):
        value = getattr(config.model, key)
        if value is None:
            continue
        if key not in accepted:
            raise ConfigError(f"model.{key} = {value!r} is not allowed: model "
                              f"{config.model.name!r} has no embedding layer")
        if key in config.model.kwargs:
            raise ConfigError(f"model.{key} is given twice: also in model.kwargs")
        kwargs[key] = value
    return kwargs


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def _check_model_memory(config: ExperimentConfig, build: Any, kwargs: dict[str, Any]) -> None:
    """Refuse, naming ``model.kwargs``, a model whose parameters alone (float32) exceed this
    machine's memory: counted on torch's ``meta`` device, which allocates nothing."""
    try:
        with torch.device("meta"):
            params = sum(p.numel() for p in build(config.model.name, **kwargs).parameters())
    except Exception:  # noqa: BLE001 - a model that cannot be built on meta: the real build says
        return
    memory = _physical_memory()
    if memory is not None and 4 * params > memory:
        raise ConfigError(
            f"model.kwargs = {dict(config.model.kwargs)!r} gives model {config.model.name!r} "
            f"{params:,} parameters ({4 * params / 2**30:,.1f} GiB as float32, before any "
            f"client copy, gradient or optimizer state), more than this machine's "
            f"{memory / 2**30:,.1f} GiB of memory: make the model smaller")


def build_spec(config: ExperimentConfig) -> LocalTrainingSpec:
    """THE local-training spec of the run: the trainer and the accountant both read it."""
    t, p = config.training, config.privacy
    try:
        return LocalTrainingSpec(
            local_steps=t.local_steps,
            batch_size=t.batch_size,
            sampling=t.sampling,
            clip_norm=p.clip_norm if p.enabled else None,
            noise_multiplier=p.z,
            optimizer=t.optimizer,
            lr=t.lr,
            momentum=t.momentum,
            betas=tuple(t.betas),
            eps=t.eps,
            weight_decay=t.weight_decay,
            secure=p.secure,
        )
    except ValueError as error:
        raise ConfigError(f"training/privacy settings: {error}") from None


def trainer_options(config: ExperimentConfig) -> dict[str, int]:
    """Keyword arguments of every algorithm's :class:`~privfl.fl.CohortTrainer`.

    ``workers``: clients trained at once, each on one torch thread (``run.threads``; default
    the cores this process may use, :func:`privfl.fl.workers.available_cores`). The result
    does not depend on it (:mod:`privfl.fl.workers`).
    """
    from privfl.fl.workers import available_cores

    return {"workers": config.run.threads or available_cores()}


def build_algorithm(config: ExperimentConfig, data: FederatedDataset | None = None) -> Any:
    """The algorithm ``federated.algorithm`` names, built from the configuration (data built if
    not given); see :mod:`privfl.algorithms.registry`."""
    data = build_dataset(config) if data is None else data
    cls = algorithm_class(config.federated.algorithm)
    try:
        return attach_protection(cls.from_config(config, data), config)
    except ConfigError:
        raise
    except ValueError as error:
        raise ConfigError(str(error)) from None


def privacy_plan(config: ExperimentConfig, data: FederatedDataset | None = None) -> Any:
    """The algorithm's privacy plan alone (no model, no training)."""
    data = build_dataset(config) if data is None else data
    return algorithm_class(config.federated.algorithm).privacy_plan(config, data)
