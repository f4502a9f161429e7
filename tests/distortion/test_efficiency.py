"""Efficiency (bytes, gradients, random numbers) of the protection mechanisms."""

import pytest

from privfl.distortion.efficiency import efficiency
from privfl.distortion.mechanisms import GaussianDistortion, PoissonRecordSampling, RandomMask


def test_efficiency_of_each_mechanism():
    gaussian = efficiency(GaussianDistortion(1e-3), 7850, 100, 0.5)
    assert gaussian == {"upload_bytes": 31400.0, "dense_upload_bytes": 31400.0,
                        "gradients": 50.0, "random_numbers": 7850.0}
    # keep 10 %: 785 values of 4 bytes plus a 982-byte bitmap
    mask = efficiency(RandomMask(0.1), 7850, 100, 0.5)
    assert mask["upload_bytes"] == pytest.approx(0.1 * 7850 * 4 + 982)
    assert efficiency(RandomMask(0.99), 7850, 100, 0.5)["upload_bytes"] == 31400.0  # dense
    sampling = efficiency(PoissonRecordSampling(0.1), 7850, 100, 0.5, bytes_per_value=8)
    assert sampling["gradients"] == pytest.approx(10.0)
    assert sampling["upload_bytes"] == 62800.0 and sampling["random_numbers"] == 100.0


def test_unknown_mechanism_is_one_line():
    with pytest.raises(ValueError, match="mechanism = 'x' is not allowed"):
        efficiency("x", 10, 10, 0.5)
