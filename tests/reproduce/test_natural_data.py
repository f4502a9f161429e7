"""privfl.reproduce.natural_data: the paper-scale runs on the papers' own natural-user and EMNIST
data; the dry run lists one as runnable when its data are here, and says how to get them when
they are not."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from privfl.config.model_names import model_names
from privfl.data import write_idx
from privfl.reproduce.natural_data import SENT140_TABLE6, natural_data_runs
from privfl.reproduce.training import configs_root, paper_rows


def _write_emnist(root, n=62):
    rng = np.random.default_rng(0)
    (root / "emnist").mkdir(parents=True)
    for part in ("train", "test"):
        stem = root / "emnist" / f"emnist-byclass-{part}"
        write_idx(f"{stem}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28), np.uint8))
        write_idx(f"{stem}-labels-idx1-ubyte", (np.arange(n) % 62).astype(np.uint8))


def test_runs_name_shipped_configs():
    root = configs_root()
    xie, emnist = natural_data_runs("xie2023"), natural_data_runs("hasircioglu2022")
    assert len(xie) == len(SENT140_TABLE6) + 1 and len(emnist) == 9
    assert natural_data_runs("zheng2021") == []
    for run in (*xie, *emnist):
        assert (root / run.config).is_file(), run.config
    with pytest.raises(ValueError, match="paper = 3 is not allowed"):
        natural_data_runs(3)


def test_emnist_dry_run_lists_a_run_as_runnable_only_when_its_data_are_here(tmp_path):
    run = next(r for r in natural_data_runs("hasircioglu2022")
               if r.config.endswith("emnist-6.2-wcs.yaml"))
    absent = dataclasses.replace(run, overrides=(f"data.root={tmp_path / 'none'}",))
    [row] = paper_rows([absent], None, dry_run=True)
    assert "not run: the data are not on this machine: EMNIST byclass is not in" in row.reason
    assert "data.download: true" in row.reason
    _write_emnist(tmp_path)
    # 697 clients of 1,000 records need more than the 62 generated images: the tiny split
    # stands in with the paper's shape scaled down
    here = dataclasses.replace(run, overrides=(f"data.root={tmp_path}", "data.clients=2",
                                               "data.train_size=31"))
    [row] = paper_rows([here], None, dry_run=True)
    assert row.reason.startswith("not run: dry run (data here; about 3.0 h")


@pytest.mark.skipif("xie2023-sent140-lstm" not in model_names(),
                    reason="the Sent140 LSTM (issue 48 item 3, models side) is not in this tree")
def test_sent140_runs_say_how_to_get_the_data(tmp_path):
    runs = [dataclasses.replace(r, overrides=(*r.overrides, f"data.root={tmp_path}"))
            for r in natural_data_runs("xie2023")]
    rows = paper_rows(runs, None, dry_run=True)
    assert len(rows) == 7
    for row in rows:
        assert "sent140 is not in" in row.reason and "preprocess.sh" in row.reason
