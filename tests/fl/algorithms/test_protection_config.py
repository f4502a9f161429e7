"""The ``protection`` section (Zhang, Chen and Yang 2022's client-side distortion) for every
algorithm of ``privfl run``: the config path equals the Python argument, every algorithm takes
it, per-layer stds reach the right parameters, bad sections fail with one line naming the key."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from test_secure_sources import CONFIGS

import privfl.distortion.layers as layers_module
from privfl.algorithms.builders import build_algorithm
from privfl.algorithms.dp_fedavg import DpFedAvg
from privfl.algorithms.registry import algorithm_class
from privfl.config import ConfigError, config_from_dict
from privfl.distortion import (
    ClientProtection,
    GaussianDistortion,
    PoissonRecordSampling,
    RandomMask,
)
from privfl.distortion.layers import LayerGaussianDistortion, resolve_layer_stds


def raw_config(name: str, protection: dict | None = None, **privacy) -> dict:
    raw = {"name": name, "seed": 3, "run": {"threads": 1}, **copy.deepcopy(CONFIGS[name])}
    raw["privacy"] = {**raw["privacy"], **privacy}
    if protection is not None:
        raw["protection"] = protection
    return raw


def dp_fedavg_raw(private: bool) -> dict:
    raw = raw_config("dp-fedavg")
    if not private:
        raw["privacy"] = {"enabled": False}
    return raw


@pytest.mark.parametrize("private", [False, True])
def test_config_path_gives_the_python_arguments_numbers_for_dp_fedavg(private):
    raw = dp_fedavg_raw(private)
    section = {"record_rate": 0.8, "mask_keep_rate": 0.9, "noise_std": 0.5}
    configured = build_algorithm(config_from_dict({**raw, "protection": section}))
    base = build_algorithm(config_from_dict(raw))
    assert base.protection is None
    python = DpFedAvg(base.predictor.model, base.spec, base.data, base.plan, seed=3,
                      protection=ClientProtection(
                          sampling=PoissonRecordSampling(0.8),
                          distortions=(RandomMask(0.9), GaussianDistortion(0.25))))
    for _ in range(2):
        a, b = configured.run_round(), python.run_round()
        assert a["train_loss"] == b["train_loss"]
    torch.testing.assert_close(configured.global_model, python.global_model, rtol=0, atol=0)
    assert not torch.equal(configured.global_model, base.global_model)


def test_equal_layer_stds_give_the_isotropic_numbers():
    """Every layer at the default std: the per-layer distortion equals Algorithm 3's."""
    raw = dp_fedavg_raw(False)
    iso = build_algorithm(config_from_dict({**raw, "protection": {"noise_std": 0.5}}))
    per = build_algorithm(config_from_dict({**raw, "protection": {
        "noise_std": 0.5, "layers": {"*.weight": 0.5, "*.bias": 0.5}}}))
    assert isinstance(iso.protection.distortions[0], GaussianDistortion)
    iso.run_round()
    per.run_round()
    torch.testing.assert_close(iso.global_model, per.global_model, rtol=0, atol=0)


PROTECTING = [n for n, raw in CONFIGS.items()
              if algorithm_class(raw["federated"].get("algorithm", "prifedsync"))
              .applies_protection]


@pytest.mark.parametrize("name", sorted(set(CONFIGS) - set(PROTECTING)))
def test_an_algorithm_without_client_side_protection_refuses_the_section(name):
    """DP-FTRL and BandMF add their noise on the server only: a protection section is refused
    by name, never silently ignored."""
    with pytest.raises(ConfigError, match=f"federated.algorithm = '{name}'.*remove the "
                                          "protection section"):
        build_algorithm(config_from_dict(raw_config(name, {"noise_std": 0.25})))


@pytest.mark.parametrize("name", PROTECTING)
def test_every_algorithm_takes_the_section_and_its_stds_reach_the_right_parameters(
        name, monkeypatch):
    """The standard normals of the per-layer distortion are replaced by ones: what each
    algorithm's distortion step adds to a client's upload is then exactly the std of the
    parameter each coordinate belongs to."""
    monkeypatch.setattr(layers_module, "standard_normal_",
                        lambda out, generator=None, secure=False: out.fill_(1.0))
    plain = build_algorithm(config_from_dict(raw_config(name)))
    section = {"noise_std": 0.25, "layers": {"*.bias": 2.0}}
    algo = build_algorithm(config_from_dict(raw_config(name, section)))
    stds = algo.protection_config.layer_stds
    assert stds == {n: 2.0 if n.endswith(".bias") else 0.25 for n in algo.trainer.param_names}
    seen = []
    distort = algo.protection.distort

    def spy(models, generator=None):
        out = distort(models, generator)
        seen.append(out - models)
        return out

    object.__setattr__(algo.protection, "distort", spy)
    algo.run_round()
    plain.run_round()
    assert seen, f"{name} never distorted an upload"
    added = algo.trainer.unflatten(torch.cat(seen))
    for param, delta in added.items():
        torch.testing.assert_close(delta, torch.full_like(delta, stds[param]), rtol=0,
                                   atol=1e-6)
    assert not torch.equal(getattr(algo, "params", getattr(algo, "global_model", None)),
                           getattr(plain, "params", getattr(plain, "global_model", None)))


def test_report_row_names_the_resolved_stds_and_what_is_not_covered():
    algo = build_algorithm(config_from_dict(raw_config("insdp-fedavg", {
        "noise_std": 0.1, "layers": {"out.*": 0.02}, "mask_keep_rate": 0.5})))
    text = algo.protection_config.text()
    assert "hidden.0.weight 0.1" in text and "out.weight 0.02" in text and "out.bias 0.02" in text
    assert "rho = 0.5" in text and "not a DP guarantee" in text
    assert "printed epsilon does not include it" in text


def test_secure_mode_refuses_seeded_protection_randomness():
    with pytest.raises(ConfigError, match=r"protection.secure = false is not allowed with "
                                          r"privacy.secure = true"):
        config_from_dict(raw_config("dp-fedavg", {"noise_std": 0.1, "secure": False},
                                    secure=True))
    algo = build_algorithm(config_from_dict(raw_config("dp-fedavg", {"noise_std": 0.1},
                                                       secure=True)))
    assert algo.protection.secure and algo.protection.distortions[0].secure
    assert "os.urandom" in algo.protection_config.text()


@pytest.mark.parametrize(("name", "section", "message"), [
    ("dp-fedavg", {"layers": {"conv*": 0.1}},
     "protection.layers['conv*'] matches no parameter of the model: its parameters are "
     "linear.weight, linear.bias"),
    ("dp-fedavg", {"layers": {"linear.*": 0.1, "*.bias": 0.2}},
     "protection.layers: parameter 'linear.bias' is matched by both 'linear.*' and '*.bias'"),
    ("dp-fedavg", {"layers": {"*.bias": -1.0}},
     "protection.layers['*.bias'] = -1.0 is out of range: must be a finite noise std >= 0"),
    ("dp-fedavg", {"noise_std": True}, "protection.noise_std"),
    ("dp-fedavg", {"record_rate": 0.0}, "protection.record_rate"),
    ("dp-fedavg", {"mask_keep_rate": 1.5}, "protection.mask_keep_rate"),
    ("dp-fedavg", {"noise": 0.1}, "protection.noise"),
    ("insdp-fedavg", {"record_rate": 0.5},
     "protection.record_rate = 0.5 is not allowed for federated.algorithm = 'insdp-fedavg' "
     "with privacy.enabled"),
    ("dp-dsgd", {"record_rate": 0.5},
     "protection.record_rate = 0.5 is not allowed for federated.algorithm = 'dp-dsgd'"),
])
def test_bad_sections_fail_with_one_line_naming_the_key(name, section, message):
    with pytest.raises(ConfigError) as error:
        build_algorithm(config_from_dict(raw_config(name, section)))
    text = str(error.value)
    assert message in text and "\n" not in text


def test_record_sampling_of_a_non_private_record_level_algorithm_is_allowed():
    raw = raw_config("insdp-fedavg", {"record_rate": 0.5})
    raw["privacy"] = {"enabled": False}
    algo = build_algorithm(config_from_dict(raw))
    metrics = algo.run_round()
    assert algo.protection.sampling.rate == 0.5 and math.isfinite(metrics["train_loss"])


def test_resolve_and_layer_distortion_checks():
    assert resolve_layer_stds(["a.w", "a.b", "c.w"], 0.3, {"a.*": 0.0}) == {
        "a.w": 0.0, "a.b": 0.0, "c.w": 0.3}
    step = LayerGaussianDistortion.from_layers({"a": 0.0, "b": 3.0}, {"a": 2, "b": 1})
    out = step(torch.zeros(4000, 3, dtype=torch.float64), torch.Generator().manual_seed(0))
    assert bool((out[:, :2] == 0).all())
    assert float(out[:, 2].std()) == pytest.approx(3.0, rel=0.05)
    # TV of N(0, v) vs N(0, v + s^2) per coordinate: zero-noise coordinates add nothing
    one = LayerGaussianDistortion(torch.tensor([3.0], dtype=torch.float64))
    assert step.tv(1.0) == pytest.approx(one.tv(1.0), rel=1e-9)
    with pytest.raises(ValueError, match=r"models must be an \[M, 3\] tensor"):
        step(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="stds must be"):
        LayerGaussianDistortion(torch.tensor([-1.0]))


def test_privfl_run_reports_the_protection_and_writes_no_unclassified_output(tmp_path):
    """End to end: config.yaml keeps the section, report.md's "what ran" shows the resolved
    stds and what the protection is not, and every output stays classified (the section adds
    no metrics key and no file)."""
    import json

    import yaml
    from typer.testing import CliRunner

    from privfl.cli.main import app

    raw = raw_config("dp-fedavg", {"noise_std": 0.01, "layers": {"*.bias": 0.0}})
    raw["federated"]["rounds"] = 2
    path = tmp_path / "protected.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    saved = yaml.safe_load((out / "config.yaml").read_text())["protection"]
    assert saved["noise_std"] == 0.01 and saved["layers"] == {"*.bias": 0.0}
    report = (out / "report.md").read_text()
    assert "linear.weight 0.01, linear.bias 0" in report and "not a DP guarantee" in report
    outputs = json.loads((out / "privacy.json").read_text())["outputs"]
    reasons = {o["name"]: o["reason"] for o in outputs}
    assert not any("not classified" in r for r in reasons.values())
    keys = set().union(*(json.loads(line) for line in
                         (out / "metrics.jsonl").read_text().splitlines()))
    assert keys <= set(reasons)
