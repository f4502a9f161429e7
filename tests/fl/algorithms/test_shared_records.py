"""Records held by several clients (an overlapping Dirichlet partition): the record-level plans
compose a shared record's holders, the card states the largest multiplicity, DP-DSGD refuses,
and a disjoint partition gives exactly the single-client numbers."""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import pytest

from privfl.accounting.dispatch import evaluate
from privfl.accounting.events import HeldByClients, Neighbouring, Sampling, Scope, dpsgd_event
from privfl.accounting.gdp.accountant import fdp_clt_mu
from privfl.accounting.methods import build_accountant
from privfl.algorithms.builders import build_dataset
from privfl.algorithms.insdp_plan import PAPER_ACCOUNTING, PAPER_OPTIONS, InsDpPrivacy
from privfl.algorithms.prifedsync import PriFedSyncPrivacy
from privfl.config import ConfigError, config_from_dict
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment, privacy_plan

DELTA = 1e-5
#: 180 training records, 4 clients of 45 (disjoint: all of them; overlapping: shared).
BASE = {
    "name": "tiny-shared",
    "seed": 4,
    "data": {"dataset": "synthetic", "synthetic_examples": 240, "test_fraction": 0.25,
             "partition": "dirichlet", "clients": 4, "train_size": 45, "test_size": 6},
    "model": {"name": "mlp", "kwargs": {"hidden": [6]}},
    "training": {"local_steps": 2, "batch_size": 8, "lr": 0.01},
    "privacy": {"sigma": 1.0, "delta": DELTA},
    "federated": {"rounds": 3},
    "run": {"threads": 1},
}


def _config(disjoint=None, **sections):
    raw = copy.deepcopy(BASE)
    if disjoint is not None:
        raw["data"]["disjoint"] = disjoint
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    if raw["federated"].get("algorithm", "prifedsync") == "prifedsync":
        raw["federated"].setdefault("client_rate", 0.7)
    elif raw["federated"]["algorithm"] == "dp-dsgd":
        raw["privacy"] = {"noise_multiplier": 1.0, "delta": DELTA, "accountants": ["wcs"]}
        raw.pop("training")
    else:
        raw["privacy"] = {"noise_multiplier": 1.0, "delta": DELTA, "accountants": ["rdp"]}
        raw["training"].update(sampling="poisson", optimizer="sgd")
    return config_from_dict(raw)


def _result(results, scope, method):
    (result,) = [r for r in results if r.extras.get("scope") == scope and r.method == method]
    return result


def _k(config):
    return build_dataset(config).record_sharing().max_multiplicity


def test_default_dirichlet_partition_is_disjoint():
    config = _config()
    assert config.data.disjoint is True and _k(config) == 1


def test_prifedsync_composes_the_holders_of_a_shared_record():
    shared, alone = _config(disjoint=False), _config(disjoint=True)
    k = _k(shared)
    assert k >= 3
    plan, plan_alone = privacy_plan(shared), privacy_plan(alone)
    results, results_alone = plan.results(3), plan_alone.results(3)
    # independent: k holders of n = 45 records, K R = 6 steps each, paper sigma 1 (z = 2)
    weak = dpsgd_event(2.0, 8 / 45, 6 * k, sampling=Sampling.WITHOUT_REPLACEMENT,
                       neighbouring=Neighbouring.REPLACE_ONE)
    strong = dpsgd_event(2.0, 8 / 45, 3 * 6 * k, sampling=Sampling.WITHOUT_REPLACEMENT,
                         neighbouring=Neighbouring.REPLACE_ONE)
    pld = build_accountant("pld")
    assert _result(results, "weak", "pld").epsilon == pytest.approx(
        pld.epsilon(weak, DELTA).epsilon, rel=1e-12)
    assert _result(results, "strong", "pld").epsilon == pytest.approx(
        pld.epsilon(strong, DELTA).epsilon, rel=1e-12)
    mu = _result(results, "weak", "gdp-clt").extras["mu"]
    assert mu == pytest.approx(math.sqrt(k) * fdp_clt_mu(8 / 45, 6, 2.0), rel=1e-12)
    for scope in ("weak", "strong"):
        assert _result(results, scope, "pld").epsilon > _result(results_alone, scope,
                                                                "pld").epsilon
        assert _result(results, scope, "pld").extras["holders"] == k
        assert "holders" not in _result(results_alone, scope, "pld").extras


def test_a_disjoint_partition_gives_exactly_the_single_client_numbers():
    config = _config(disjoint=True)
    plan = privacy_plan(config)
    data = build_dataset(config)
    unshared = PriFedSyncPrivacy(plan.spec, data.client_sizes, client_rate=0.7,
                                 empty_cohort="redraw", delta=DELTA,
                                 accountants=("gdp-clt", "pld"), options=None, seed=4)
    assert plan.results(3) == unshared.results(3)
    alone = dpsgd_event(2.0, 8 / 45, 6, sampling=Sampling.WITHOUT_REPLACEMENT,
                        neighbouring=Neighbouring.REPLACE_ONE)
    assert _result(plan.results(3), "weak", "pld").epsilon == pytest.approx(
        build_accountant("pld").epsilon(alone, DELTA).epsilon, rel=1e-12)


def test_card_states_the_largest_multiplicity():
    shared, alone = _config(disjoint=False), _config(disjoint=True)
    k = _k(shared)
    row = privacy_plan(shared).card(3)["record multiplicity"]
    assert row.startswith(f"k = {k}: ") and "compose" in row
    assert privacy_plan(alone).card(3)["record multiplicity"].startswith("k = 1: ")
    insdp = privacy_plan(_config(disjoint=False, federated={"algorithm": "insdp-fedavg"}))
    assert insdp.card(3)["record multiplicity"].startswith(f"k = {k}: ")


def test_insdp_fedavg_composes_the_holders_rdp():
    config = _config(disjoint=False, federated={"algorithm": "insdp-fedavg"})
    k = _k(config)
    results = privacy_plan(config).results(3)
    # client-updates: k holders' V T = 6 Poisson steps at q = 8/45, multiplier 1
    event = dpsgd_event(1.0, 8 / 45, 6 * k)
    assert _result(results, "client-updates", "rdp").epsilon == pytest.approx(
        build_accountant("rdp").epsilon(event, DELTA).epsilon, rel=1e-12)
    assert _result(results, "paper", "rdp").epsilon == pytest.approx(
        build_accountant("rdp", PAPER_OPTIONS).epsilon(event, DELTA).epsilon, rel=1e-12)
    alone = privacy_plan(_config(disjoint=True, federated={"algorithm": "insdp-fedavg"}))
    assert (_result(results, "client-updates", "rdp").epsilon
            > _result(alone.results(3), "client-updates", "rdp").epsilon)


def test_insdp_fedsgd_global_model_splits_the_mean_noise_among_holders():
    """m = N = 4 noises in the mean, k holders: each holder keeps floor(4 / k) of them, so
    the record is k sampled Gaussians of multiplier sqrt(floor(4 / k)) per round."""
    config = _config(disjoint=False, federated={"algorithm": "insdp-fedsgd"},
                     training={"local_steps": 1})
    k = _k(config)
    results = privacy_plan(config).results(3)
    event = dpsgd_event(math.sqrt(4 // min(k, 4)), 8 / 45, 3 * k)
    assert _result(results, "global-model", "rdp").epsilon == pytest.approx(
        build_accountant("rdp").epsilon(event, DELTA).epsilon, rel=1e-12)
    one = dpsgd_event(2.0, 8 / 45, 3)  # k = 1: sigma sqrt(m) = 2, today's number
    alone = privacy_plan(_config(disjoint=True, federated={"algorithm": "insdp-fedsgd"},
                                 training={"local_steps": 1}))
    assert _result(alone.results(3), "global-model", "rdp").epsilon == pytest.approx(
        build_accountant("rdp").epsilon(one, DELTA).epsilon, rel=1e-12)


def test_insdp_results_are_the_dispatchers_answer_to_its_event():
    """The plan only builds its event: each scope's results are dispatch.evaluate of
    plan.event(rounds, scope), whose HeldByClients carries the holder count (the global-model
    multiplier sigma sqrt(floor(m / h)) of a client that is one of h holders)."""
    config = _config(disjoint=False, federated={"algorithm": "insdp-fedsgd"},
                     training={"local_steps": 1})
    k = _k(config)
    plan = privacy_plan(config)
    results = plan.results(3)
    tree = plan.event(3)
    assert tree.name == "global-model" and isinstance(tree.event, HeldByClients)
    primary = evaluate(tree, DELTA, methods=plan.accountants, options=plan.options)
    paper = evaluate(plan.event(3, "paper"), DELTA, methods="rdp", options=PAPER_OPTIONS)
    assert results == primary + [
        dataclasses.replace(r, extras={**r.extras, "accounting": PAPER_ACCOUNTING})
        for r in paper]
    assert [r.extras["scope"] for r in results] == ["global-model", "paper"]
    by_holders = dict(tree.event.by_holders)
    assert k in by_holders  # the worst record's count, with its own events
    z = {e.steps[0][0].noise_multiplier for e in by_holders[k]}
    assert z == {math.sqrt(4 // min(k, 4))}
    # a tree that forgets the holder count credits every holder the whole mean's noise
    forgetful = Scope("global-model", dataclasses.replace(tree.event, by_holders=()))
    assert evaluate(forgetful, DELTA, methods="rdp")[0].epsilon < primary[0].epsilon
    # client-updates: a client's event does not depend on the holder count
    updates = privacy_plan(_config(disjoint=False, federated={"algorithm": "insdp-fedavg"}))
    assert updates.event(3).event.by_holders == ()
    assert updates.results(3)[0] == evaluate(updates.event(3), DELTA, methods="rdp")[0]


def test_insdp_plan_takes_record_sharing_and_checks_it():
    config = _config(disjoint=True, federated={"algorithm": "insdp-fedavg"})
    plan = privacy_plan(config)
    with pytest.raises(ValueError, match=r"sharing = 3 is not allowed: must be a RecordSharing"):
        InsDpPrivacy(plan.spec, [45] * 4, algorithm="fedavg", sharing=3)


def test_dp_dsgd_refuses_an_overlapping_partition():
    raw = {"federated": {"algorithm": "dp-dsgd", "client_rate": 0.5, "record_rate": 0.2}}
    config = _config(disjoint=False, **raw)
    with pytest.raises(ValueError, match=r"data shares records between clients \(up to k = "
                       r"\d+ clients hold one record\): DP-DSGD"):
        privacy_plan(config)
    assert privacy_plan(_config(disjoint=True, **raw)).results(1)


def test_a_disjoint_partition_that_does_not_fit_names_the_keys():
    with pytest.raises(ConfigError, match=r"data.train_size = 46 is out of range: data.clients "
                       r"= 4 disjoint clients need 184 records, only 180 available"):
        build_dataset(_config(data={"train_size": 46}))


def test_run_writes_the_multiplicity_and_checks_privacy(tmp_path):
    config = _config(disjoint=False, federated={"rounds": 2})
    k = _k(config)
    result = Experiment.create(config, tmp_path / "run").run()
    privacy = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert privacy["setting"]["record multiplicity"].startswith(f"k = {k}: ")
    assert f"k = {k}: " in (tmp_path / "run" / "report.md").read_text()
    assert all(r.extras["holders"] == k for r in result.privacy)
    assert check_run_privacy(tmp_path / "run").ok


def test_insdp_cyclic_charges_only_the_holders_that_took_part():
    """Round 1 of a cyclic schedule (m = 2 of 4) charges clients 0 and 1 only: a shared
    record's exposure counts just the holders among them (brute force over the records)."""
    config = _config(disjoint=False, federated={"algorithm": "insdp-fedavg",
                                                "clients_per_round": 2,
                                                "client_sampling": "cyclic"})
    data = build_dataset(config)
    holders = {}
    for j in (0, 1):
        for record in data.train_indices[j].tolist():
            holders[record] = holders.get(record, 0) + 1
    h = max(holders.values())
    assert h == 2  # the two charged clients share a record
    result = _result(privacy_plan(config).results(1), "client-updates", "rdp")
    event = dpsgd_event(1.0, 8 / 45, 2 * h)  # V = 2 steps, one charged round, h holders
    assert result.epsilon == pytest.approx(
        build_accountant("rdp").epsilon(event, DELTA).epsilon, rel=1e-12)
    assert result.extras["holders"] == h
