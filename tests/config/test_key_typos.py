"""An unknown configuration key is answered with the key it most likely meant."""

from __future__ import annotations

import pytest

from privfl.config import ConfigError, load_config


@pytest.mark.parametrize(("override", "hint"), [
    ("federated.round=3", "federated.round is not a known key (did you mean rounds?)"),
    ("rounds=10", "rounds is not a known key (did you mean federated.rounds?)"),
    ("federated.lr=0.1", "federated.lr is not a known key (did you mean training.lr?)"),
    ("training.batchsize=8", "training.batchsize is not a known key (did you mean batch_size?)"),
])
def test_an_unknown_key_suggests_the_known_one(override, hint):
    with pytest.raises(ConfigError) as error:
        load_config(None, [override])
    assert hint in str(error.value)
    assert "allowed keys in" in str(error.value)  # the list stays


def test_a_key_close_to_nothing_gets_no_guess():
    with pytest.raises(ConfigError) as error:
        load_config(None, ["zzz=1"])
    assert "did you mean" not in str(error.value)
