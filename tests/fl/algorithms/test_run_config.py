"""``privfl run`` configurations: schema errors name the key, --set overrides, shipped configs."""

from __future__ import annotations

import copy
import importlib.util
import math
import warnings
from pathlib import Path

import pytest
import torch
import yaml

from privfl.accounting.fdp.federated import ClientTraining, FederatedSetting
from privfl.config import (
    DEMO_CONFIG,
    ConfigError,
    apply_overrides,
    config_from_dict,
    dump_config,
    load_config,
    parse_override,
)
from privfl.runs.experiment import build_spec

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("training.lrr=1", r"^training.lrr is not a known key \(did you mean lr\?\): allowed "
                           r"keys in training are "
                           r"local_steps, batch_size, .*lr, "),
        ("colour=red", r"^colour is not a known key: allowed keys in the top level are name, "),
        ("training.optimizer=adamw", r"^training.optimizer = 'adamw' is not allowed: must be "
                                     r"'sgd', 'momentum' or 'adam'$"),
        ("federated.client_rate=0", r"^federated.client_rate = 0 is out of range: must be > 0"),
        ("federated.client_rate=1.5", r"federated.client_rate = 1.5 is out of range: must be <= 1"),
        ("federated.empty_cohort=wait", r"federated.empty_cohort = 'wait' is not allowed: must be "
                                        r"'redraw' or 'skip'"),
        ("federated.helper=attention", r"federated.helper = 'attention' is not allowed"),
        ("privacy.delta=1", r"privacy.delta = 1 is out of range: must be < 1"),
        ("training.local_steps=many", r"training.local_steps = 'many' is not valid"),
        ("model.name=resnet", r"model.name = 'resnet' is not allowed: must be one of "
                              r"zheng2021-mnist-cnn, "),
        ("data.dataset=imagenet", r"data.dataset = 'imagenet' is not allowed: must be one of "
                                  r"mnist-5k, "),
        ("privacy.sigma=1", r"privacy.sigma and privacy.noise_multiplier: both given"),
        ("training.betas=[0.9]", r"training.betas\[1\] is missing"),
        ("data=3", r"data = 3 is not allowed: must be a mapping"),
        ("seed.value=1", r"--set seed.value: seed = 0 is a value, not a section"),
        ("stop.epsilon=-1", r"stop.epsilon = -1 is out of range: must be > 0"),
    ],
)
def test_errors_name_the_key_and_the_allowed_values(override, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config(None, [override])
    assert "\n" not in str(info.value)


def test_several_errors_in_one_line():
    with pytest.raises(ConfigError) as info:
        config_from_dict({"training": {"lr": -1, "batch": 3}})
    text = str(info.value)
    assert "training.lr = -1 is out of range" in text and "training.batch is not a known" in text
    assert "\n" not in text


def test_overrides_with_dotted_keys_and_yaml_values():
    config = load_config(None, ["federated.rounds=7", "training.lr=1e-3",
                                "model.kwargs.hidden=[4, 5]",
                                "stop.target_accuracy=0.9", "privacy.accountants=[pld]",
                                "description=a b=c"])
    assert config.federated.rounds == 7 and config.training.lr == 1e-3
    assert config.model.kwargs == {"hidden": [4, 5]}
    assert config.stop.target_accuracy == 0.9 and config.privacy.accountants == ["pld"]
    assert config.description == "a b=c"  # only the first '=' splits
    assert parse_override("run.threads=null") == ("run.threads", None)
    raw = apply_overrides({"a": {"b": 1}}, ["a.c.d=2"])
    assert raw == {"a": {"b": 1, "c": {"d": 2}}}


@pytest.mark.parametrize("bad", ["novalue", "=3", "a..b=1"])
def test_malformed_overrides(bad):
    with pytest.raises(ConfigError, match=r"--set .* is not valid"):
        load_config(None, [bad])


def test_yaml_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="is not a file"):
        load_config(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("training: {lr: 0.1\n")
    with pytest.raises(ConfigError, match=r"is not valid YAML \(line"):
        load_config(broken)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must be a mapping of sections"):
        load_config(listed)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_config(empty).name == "run"  # every key has a default


def test_resolved_config_round_trips():
    config = load_config(None, ["training.betas=[0.8, 0.99]"])
    again = config_from_dict(yaml.safe_load(dump_config(config)))
    assert again == config


def test_noise_conventions():
    sigma = load_config(None, ["privacy.noise_multiplier=null", "privacy.sigma=0.75"])
    z = load_config(None, ["privacy.noise_multiplier=1.5"])
    assert build_spec(sigma) == build_spec(z)
    assert build_spec(sigma).noise_multiplier == 1.5
    off = load_config(None, ["privacy.enabled=false"])
    spec = build_spec(off)
    assert spec.clip_norm is None and spec.noise_multiplier == 0 and not spec.private


def test_secure_mode_and_its_deprecated_alias():
    assert not load_config(None).privacy.secure and not build_spec(load_config(None)).secure
    secure = load_config(None, ["privacy.secure=true"])
    alias = load_config(None, ["privacy.secure_noise=true"])
    assert secure == alias and build_spec(alias).secure
    assert load_config(None, ["privacy.secure=true", "privacy.secure_noise=true"]) == secure
    text = dump_config(alias)  # config.yaml records the one key, privacy.secure
    assert "secure: true" in text and "secure_noise" not in text
    for a, b in (("true", "false"), ("false", "true")):
        with pytest.raises(ConfigError, match=rf"^privacy.secure = {a} and privacy.secure_noise "
                           rf"= {b} disagree: .* deprecated alias of privacy.secure") as info:
            load_config(None, [f"privacy.secure={a}", f"privacy.secure_noise={b}"])
        assert "\n" not in str(info.value)


def test_demo_yaml_equals_the_built_in_demo():
    assert load_config(CONFIGS / "demo.yaml") == load_config(None)
    assert yaml.safe_load((CONFIGS / "demo.yaml").read_text()) == DEMO_CONFIG


def _paper_configs():
    return sorted((CONFIGS / "zheng2021").glob("*.yaml"))


def test_every_shipped_config_validates():
    """Every run configuration under configs/ (the trade-off harness's own configs, with a
    top-level ``tradeoff`` section, are checked by its tests)."""
    files = [p for p in CONFIGS.rglob("*.yaml")
             if "tradeoff" not in (yaml.safe_load(p.read_text()) or {})]
    assert len(files) >= 100
    for path in files:
        load_config(path)



def test_zheng2021_configs_are_the_generators_output(tmp_path, monkeypatch):
    """configs/zheng2021/*.yaml are exactly what generate.py writes (nothing stale or missing);
    each ``name`` is ``zheng2021-`` + the file name and uses the current model names."""
    spec = importlib.util.spec_from_file_location("zheng2021_generate",
                                                  CONFIGS / "zheng2021" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "HERE", tmp_path)
    module.main()
    shipped = {path.name: path.read_text() for path in _paper_configs()}
    assert {path.name: path.read_text() for path in tmp_path.glob("*.yaml")} == shipped
    assert len(shipped) == 24
    for path in _paper_configs():
        raw = yaml.safe_load(path.read_text())
        assert raw["name"] == f"zheng2021-{path.stem}"
        assert raw["model"]["name"] in ("zheng2021-mnist-cnn", "zheng2021-cifar-cnn")


def test_deprecated_model_name_runs_as_its_current_name():
    """A config naming a model by its old name validates and builds the same model from the same
    seed as the current name (the alias is looked up in privfl.models.MODEL_ALIASES)."""
    from privfl.algorithms.builders import build_dataset, build_model

    current = load_config(None, ["model.name=xie2023-mnist-cnn", "model.kwargs={}"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = load_config(None, ["model.name=seed2-mnist-cnn", "model.kwargs={}"])
        data = build_dataset(current)
        models = [build_model(config, data) for config in (old, current)]
    assert type(models[0]) is type(models[1])
    for (key, a), b in zip(models[0].state_dict().items(), models[1].state_dict().values(),
                           strict=True):
        assert torch.equal(a, b), key


def test_deprecated_model_name_is_stored_as_its_current_name():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        config = load_config(None, ["model.name=seed0-mnist-cnn"])
    assert config.model.name == "zheng2021-mnist-cnn"


def _paper_client(spec, records):
    """Zheng et al. 2021's ClientTraining (noise multiplier z = 2 sigma) of a run's spec: its step
    must be the step the trainer runs (the spec's privacy_step), so the paper's mu is about this
    run."""
    client = ClientTraining(records, spec.batch_size, spec.local_steps, spec.noise_multiplier)
    assert client.step() == spec.privacy_step(records)
    return client


@pytest.mark.parametrize(
    ("p", "sigma", "rounds", "paper_r", "paper_mu"),
    [
        (1, 1.0, 300, 93, 2.71), (1, 0.9, 300, 83, 3.10), (1, 0.75, 300, 64, 3.96),
        (0.5, 1.0, 300, 194, 3.92), (0.5, 0.9, 300, 176, 4.51), (0.5, 0.75, 300, 127, 5.58),
        (0.25, 1.0, 500, 386, 5.52), (0.25, 0.9, 600, 325, 6.13), (0.25, 0.75, 600, 245, 7.75),
    ],
)
def test_table1_configs(p, sigma, rounds, paper_r, paper_mu):
    config = load_config(CONFIGS / "zheng2021" / f"fmnist-p{p:g}-sigma{sigma:g}.yaml")
    assert config.data.dataset == "fashion-mnist" and config.data.clients == 100
    assert config.data.shards_per_client * config.data.shard_size == 600
    assert (config.training.batch_size, config.training.local_steps) == (16, 38)
    assert config.training.optimizer == "adam" and config.training.lr == 0.001
    assert config.federated.client_rate == p and config.federated.rounds == rounds
    assert config.federated.alpha == 0.1 and config.federated.helper == "interpolation"
    client = _paper_client(build_spec(config), 600)
    assert client.noise_multiplier == 2 * sigma  # the paper's sigma = z / 2
    mu = FederatedSetting((client,) * 100, paper_r, p).mu_max()
    assert mu == pytest.approx(paper_mu, abs=0.005)  # the paper's Table 1 mu at its R


@pytest.mark.parametrize(("sigma", "paper_r", "paper_mu"),
                         [(1.0, 266, 3.24), (0.9, 229, 3.64), (0.75, 191, 4.84)])
def test_table2_configs(sigma, paper_r, paper_mu):
    config = load_config(CONFIGS / "zheng2021" / f"fmnist-p0.5-sigma{sigma:g}-b8.yaml")
    assert (config.training.batch_size, config.training.local_steps) == (8, 76)
    client = _paper_client(build_spec(config), 600)
    assert FederatedSetting((client,) * 100, paper_r, 0.5).mu_max() == pytest.approx(
        paper_mu, abs=0.005)


def test_nonprivate_baselines_match_their_private_runs():
    for path in _paper_configs():
        if "nonprivate" not in path.name:
            continue
        base = load_config(path)
        assert not base.privacy.enabled
        twin_name = path.name.replace("nonprivate", "sigma0.75")
        twin = load_config(path.with_name(twin_name))
        a, b = copy.deepcopy(base.model_dump()), copy.deepcopy(twin.model_dump())
        for d in (a, b):
            d.pop("name"), d.pop("description"), d.pop("privacy")
        assert a == b, path.name


@pytest.mark.parametrize(("p", "sigma", "paper_r", "paper_mu"),
                         [(1, 1.0, 468, 6.70), (1, 0.75, 321, 9.77), (1, 0.5, 207, 26.81),
                          (0.5, 1.0, 904, 9.31), (0.5, 0.75, 671, 14.13), (0.5, 0.5, 405, 37.51)])
def test_table3_cifar_configs(p, sigma, paper_r, paper_mu):
    config = load_config(CONFIGS / "zheng2021" / f"cifar10-p{p:g}-sigma{sigma:g}.yaml")
    assert config.data.partition == "dirichlet" and config.data.beta == 0.5
    assert (config.data.train_size, config.data.test_size) == (500, 200)
    assert (config.training.batch_size, config.training.local_steps) == (16, 32)
    assert (config.training.lr, config.training.weight_decay) == (0.005, 0.0005)
    client = _paper_client(build_spec(config), 500)
    mu = FederatedSetting((client,) * 100, paper_r, p).mu_max()
    assert math.isclose(mu, paper_mu, abs_tol=0.005)
    # the reference code's overlapping split is kept: a record held by up to 7 clients
    # composes its holders (tests/data/test_data_sharing.py pins k = 7)
    assert config.data.disjoint is False
    shared = FederatedSetting((client,) * 100, paper_r, p, multiplicity=7).mu_max()
    assert math.isclose(shared, math.sqrt(7) * mu, rel_tol=1e-12)


def test_poisson_local_batches_are_accounted_as_poisson_add_remove(tmp_path):
    """PriFedSync with Poisson local batches (no paper-convention detour): the plan gives every
    accountant Poisson steps at q = B / n_j under add/remove neighbours, and the card says so."""
    from privfl.runs.experiment import privacy_plan

    config = load_config(None, ["training.sampling=poisson", "federated.rounds=4",
                                "privacy.accountants=[gdp-clt, pld, rdp]"])
    plan = privacy_plan(config)
    results = plan.results(4)
    assert {r.neighbouring for r in results} == {"add-remove"}
    assert {r.sampling for r in results} == {"poisson (q=0.04)"}
    assert {r.kind for r in results if r.method != "gdp-clt"} == {"bound"}
    card = plan.card(4)
    assert card["neighbouring"].startswith("add/remove")
    assert "Poisson (expected size B)" in card["sampling"]
    # the same event as the accountant gets for one client of 400 records directly
    from privfl.accounting.events import Neighbouring, Sampling, dpsgd_event
    from privfl.accounting.methods import account

    event = dpsgd_event(2.5, 16 / 400, 12 * 4, sampling=Sampling.POISSON,
                        neighbouring=Neighbouring.ADD_REMOVE)
    direct = account(event, delta=1e-5, methods="pld").results[0]
    weak_pld = next(r for r in results if r.method == "pld" and r.extras["scope"] == "weak")
    assert weak_pld.epsilon == direct.epsilon


def test_data_classes_make_a_binary_task():
    """data.classes keeps the listed classes, relabelled 0..k-1 (Xie et al. 2023's 0 vs 1)."""
    from privfl.algorithms.builders import build_dataset

    config = load_config(None, ["data.classes=[7, 1]", "data.partition=iid", "data.clients=4",
                                "data.test_size=10"])
    data = build_dataset(config)
    assert data.num_classes == 2
    assert set(data.train.y.tolist()) == set(data.test.y.tolist()) == {0, 1}
    full = build_dataset(load_config(None, ["data.partition=iid", "data.clients=4",
                                            "data.test_size=10"]))
    # class 7 became 0 and class 1 became 1; the images are the originals
    sevens = full.train.x[full.train.y == 7]
    assert data.train.x[data.train.y == 0].shape[1:] == sevens.shape[1:]
    assert (data.train.y == 0).sum() == (full.train.y == 7).sum()
    with pytest.raises(ConfigError, match=r"data.classes = \[0, 12\] is not valid"):
        build_dataset(load_config(None, ["data.classes=[0, 12]"]))
    with pytest.raises(ConfigError, match="at least two distinct"):
        load_config(None, ["data.classes=[2, 2]"])
