"""Records held by several clients (privfl.data.sharing): multiplicity by pool index."""

from __future__ import annotations

import numpy as np
import pytest

from privfl.config.schema import DataConfig
from privfl.data import Dataset, FederatedDataset, federate_dirichlet, synthetic_dataset
from privfl.data.sharing import RecordSharing, record_sharing


def test_record_sharing_counts_holders_by_pool_index():
    sharing = record_sharing([np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([5, 2])])
    assert sharing.max_multiplicity == 3  # record 2: clients 0, 1, 2
    assert sharing.distinct_records == 5  # 0, 1, 2, 3, 5
    assert sharing.shared_records == 2  # 1 and 2
    assert sharing.holder_sets == ((0, 1), (0, 1, 2))
    assert not sharing.disjoint and "k = 3: 2 of 5" in sharing.describe()


def test_disjoint_partition_has_multiplicity_one():
    sharing = record_sharing([np.array([0, 1]), np.array([2]), np.array([3, 4])])
    assert sharing == RecordSharing(1, 5, 0, ())
    assert sharing.disjoint and sharing.describe().startswith("k = 1")


def test_identity_is_the_pool_index_not_the_pixels():
    x = np.zeros((4, 1, 2, 2), dtype=np.float32)  # four identical images
    pool = Dataset(x, np.array([0, 1, 0, 1]), "same", 2)
    fed = FederatedDataset(pool, pool, [np.array([0, 1]), np.array([2, 3])])
    assert fed.record_sharing().max_multiplicity == 1
    shared = FederatedDataset(pool, pool, [np.array([0, 1]), np.array([1, 3])])
    assert shared.record_sharing().max_multiplicity == 2
    assert shared.record_sharing().holder_sets == ((0, 1),)


@pytest.mark.parametrize("disjoint", [False, True])
def test_dirichlet_overlap_is_exposed(disjoint):
    full = synthetic_dataset(1400, 5, (1, 2, 2), seed=0)
    train, test = full.split(0.25, seed=0)  # 1050 training records
    fed = federate_dirichlet(train, test, num_clients=10, train_size=100, test_size=5,
                             beta=0.5, disjoint=disjoint, seed=2)
    sharing = fed.record_sharing()
    counts = np.bincount(np.concatenate(fed.train_indices))  # independent count
    assert sharing.max_multiplicity == counts.max()
    assert sharing.shared_records == int((counts > 1).sum())
    assert fed.summary()["max_multiplicity"] == sharing.max_multiplicity
    assert (sharing.max_multiplicity == 1) == disjoint
    for holders in sharing.holder_sets:  # every set really shares a record
        common = set(fed.train_indices[holders[0]].tolist())
        for j in holders[1:]:
            common &= set(fed.train_indices[j].tolist())
        assert common


def test_dirichlet_default_is_disjoint():
    assert DataConfig().disjoint is True


def test_reference_cifar_split_holds_a_record_in_up_to_seven_clients():
    """Zheng et al. 2021's CIFAR-10 split (100 clients x 500, beta 0.5, overlapping, seed
    1230, as configs/zheng2021/cifar10-*.yaml): the multiplicity depends only on the 5,000
    records per class, so tiny stand-in images give the real partition's k (the constant the
    configs' comments quote)."""
    import importlib.util
    from pathlib import Path

    y = np.repeat(np.arange(10), 5000)
    train = Dataset(np.zeros((y.size, 1, 1, 1), np.float32), y, "cifar-like", 10)
    test = Dataset(np.zeros((10, 1, 1, 1), np.float32), np.arange(10), "test", 10)
    fed = federate_dirichlet(train, test, num_clients=100, train_size=500, test_size=1,
                             beta=0.5, disjoint=False, seed=1230)
    sharing = fed.record_sharing()
    assert (sharing.max_multiplicity, sharing.shared_records) == (7, 13150)
    path = Path(__file__).parents[2] / "configs" / "zheng2021" / "generate.py"
    spec = importlib.util.spec_from_file_location("zheng2021_generate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert sharing.max_multiplicity == module.CIFAR_MULTIPLICITY
