"""One name per concept (docs/naming.md): the identifier ``sigma`` is on its way out of src/.

``sigma`` has meant three things in privfl (Zheng et al. 2021's noise std / 2C, a noise
standard deviation z C, and a noise multiplier z); docs/naming.md gives each its one internal
identifier. Until the rename lands, this test keeps the number of places where ``sigma`` is used
as an identifier (a variable, parameter, attribute or keyword) from growing, and asks for the
ceiling to be lowered when it shrinks, so it only goes down (after the rename, what remains are
the edges docs/naming.md keeps, such as the config key ``privacy.sigma``). Docstrings and
comments, where ``sigma`` names a paper's symbol, do not count.

The same ratchet covers the names retired for the clip norm (``clip``, ``clipping_norm`` ->
``clip_norm``), the fixed number of clients per round (``users_per_round`` -> ``cohort_size``)
and the sampling rate (``sampling_prob`` -> ``sampling_rate``), counted as one group: an
identifier named exactly ``clip`` cannot be told from ``np.clip`` or a method that clips, so the
group's ceiling counts what remains after the rename (the edges and the other meanings).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
NAME = "sigma"
#: places where ``sigma`` is an identifier in src/ after the rename (2026-11-27): the config
#: edge ``privacy.sigma`` (13) and accounting/contraction/report.py (2, still to rename)
CEILING = 13

RETIRED = ("clip", "clipping_norm", "users_per_round", "sampling_prob")
#: places where a retired name is an identifier in src/ after the rename (2026-11-27): ``clip``
#: 24 (``np.clip``, ``Tensor.clip`` and ``UpdateClipping.clip``, which clip; none is the clip
#: norm), ``sampling_prob`` 10 (dp-accounting's keyword and attribute in accounting/pld/steps.py),
#: ``users_per_round`` 5 (the config edge ``federated.users_per_round``: its field, its checks
#: and the conversion to ``cohort_size`` in ``ProjectedSgd.privacy_plan``)
RETIRED_CEILING = 39


def _identifiers(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.arg):
            names.append(node.arg)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            names.append(node.arg)
    return names


def _uses(names: tuple[str, ...] = (NAME,)) -> Counter:
    counts: Counter = Counter()
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        counts[path.relative_to(SRC).as_posix()] = sum(
            1 for name in _identifiers(tree) if name in names)
    return +counts


def test_sigma_as_an_identifier_does_not_spread():
    uses = _uses()
    total = sum(uses.values())
    assert total <= CEILING, (
        f"'{NAME}' is used as an identifier {total} times in src/ (ceiling {CEILING}); new code "
        f"uses the internal names of docs/naming.md (noise_multiplier, noise_std, ...). "
        f"Most uses: {uses.most_common(5)}")


def test_the_ceiling_only_comes_down():
    total = sum(_uses().values())
    assert total == CEILING, (
        f"'{NAME}' is now used {total} times as an identifier: lower CEILING in "
        f"tests/test_naming.py to {total}")


def test_the_counter_sees_parameters_attributes_and_keywords():
    tree = ast.parse("def f(sigma):\n    x.sigma = g(sigma=sigma)\n    '''sigma in prose'''\n")
    assert _identifiers(tree).count(NAME) == 4


def test_retired_names_do_not_spread():
    uses = _uses(RETIRED)
    total = sum(uses.values())
    assert total <= RETIRED_CEILING, (
        f"{', '.join(RETIRED)} are used as identifiers {total} times in src/ (ceiling "
        f"{RETIRED_CEILING}); new code uses the internal names of docs/naming.md (clip_norm, "
        f"cohort_size, sampling_rate). Most uses: {uses.most_common(5)}")


def test_the_retired_ceiling_only_comes_down():
    total = sum(_uses(RETIRED).values())
    assert total == RETIRED_CEILING, (
        f"the retired names ({', '.join(RETIRED)}) are now used {total} times as identifiers: "
        f"lower RETIRED_CEILING in tests/test_naming.py to {total}")


def test_the_retired_counter_sees_every_retired_name():
    tree = ast.parse("def f(clip, users_per_round):\n    x.sampling_prob = g(clipping_norm=clip)\n"
                     "    '''clip in prose'''\n")
    assert sum(1 for name in _identifiers(tree) if name in RETIRED) == 5
