"""Config YAML: repeated keys, aliases ("billion laughs"), merge keys, long integers, deep
nesting and oversized files are one-line ConfigErrors naming the file, line and dotted key."""

from __future__ import annotations

import tracemalloc

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.config import ConfigError, config_from_dict, load_config, read_yaml
from privfl.config.safe_yaml import MAX_YAML_BYTES, YAMLInputError, load_strict


def _error(tmp_path, text: str, name: str = "c.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    message = str(info.value)
    assert message.startswith(f"config = {str(path)!r} ") and "\n" not in message
    return message.removeprefix(f"config = {str(path)!r} ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seed: 1\nname: a\nseed: 2\n",
         "is not valid YAML (line 3, column 1): seed is given twice (first on line 1)"),
        ("training:\n  lr: 0.1\n  batch_size: 3\n  lr: 0.2\n",
         "is not valid YAML (line 4, column 3): training.lr is given twice (first on line 2)"),
        ("model:\n  name: mlp\n  kwargs: {hidden: [4], hidden: [5]}\n",
         "(line 3, column 25): model.kwargs.hidden is given twice (first on line 3)"),
        ("model:\n  kwargs:\n    layers:\n      - {a: 1}\n      - {b: 1, b: 2}\n",
         "(line 5, column 16): model.kwargs.layers[1].b is given twice (first on line 5)"),
        ("run:\n  yes: 1\n  true: 2\n",  # YAML 1.1: the same boolean key
         "(line 3, column 3): run.true is given twice (first on line 2)"),
        ("privacy:\n  1: a\n  0x1: b\n", "privacy.0x1 is given twice (first on line 2)"),
    ],
    ids=["top", "section", "flow-mapping", "in-a-list", "bool-spellings", "int-spellings"],
)
def test_repeated_keys_are_errors_at_any_depth(tmp_path, text, message):
    got = _error(tmp_path, text)
    assert message in got and got.endswith(": a key may appear only once")


def test_billion_laughs_in_model_kwargs_refused_before_expansion(tmp_path):
    lines = ["model:", "  name: mlp", "  kwargs:", "    l0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"    l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")  # 9^10 = 3.5e9 leaves once expanded
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as info:
            load_config(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(info.value) == (
        f"config = {str(path)!r} is not valid YAML (line 4, column 9): anchor &l0 is not "
        "allowed: privfl refuses YAML anchors and aliases (they can expand into huge objects)"
    )
    assert peak < 10 * 2**20


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [1]\nb: *a\n", "(line 2, column 4): alias *a is not allowed: write the value out"),
        ("training:\n  <<: {lr: 0.1}\n  lr: 0.2\n",
         "(line 2, column 3): merge key << in training is not allowed: write the keys out"),
        ("seed: " + "9" * 5000 + "\n",
         "(line 1, column 7): an integer of 5000 digits is too long: at most 4300 digits"),
        ("model: " + "[" * 5000 + "]" * 5000 + "\n",
         "is not valid YAML: nested deeper than the YAML reader allows"),
    ],
    ids=["alias", "merge-key", "long-integer", "deep-nesting"],
)
def test_other_refused_constructs(tmp_path, text, message):
    assert message in _error(tmp_path, text)


def test_oversized_and_undecodable_files(tmp_path):
    got = _error(tmp_path, "name: " + "x" * MAX_YAML_BYTES + "\n")
    assert got == (f"has {MAX_YAML_BYTES + 7} bytes: a config file must be at most "
                   f"{MAX_YAML_BYTES} bytes (configs are a few kB)")
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(invalid continuation byte at "
                                          r"byte 9\)"):
        read_yaml(path)
    with pytest.raises(YAMLInputError, match="characters is too long"):
        load_strict("a" * (MAX_YAML_BYTES + 1))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.kwargs={a: &x [1], b: *x}", "--set model.kwargs is not valid: anchor &x is not"),
        ("model.kwargs={a: 1, a: 2}", "--set model.kwargs is not valid: a is given twice"),
        ("seed=" + "9" * 5000, "--set seed is not valid: an integer of 5000 digits is too long"),
    ],
)
def test_set_values_follow_the_same_rules(override, message):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_error_messages_quote_values_briefly():
    with pytest.raises(ConfigError) as info:
        config_from_dict({"seed": -(10**5000)})
    assert str(info.value) == "seed = -<a 5001-digit integer> is out of range: must be >= 0"
    with pytest.raises(ConfigError) as info:
        config_from_dict({"name": list(range(20_000))})
    text = str(info.value)
    length = len(repr(list(range(20_000))))
    assert text.startswith("name = [0, 1, 2, ")
    assert text.endswith(f"... ({length} characters) is not valid: input should be a valid string")
    assert len(text) < 300


def test_shipped_style_configs_and_dumps_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("# comment\nname: demo\nmodel:\n  kwargs: {hidden: [100]}\n"
                    "training: {lr: 0.005, betas: [0.9, 0.999]}\n")
    assert read_yaml(path) == {"name": "demo", "model": {"kwargs": {"hidden": [100]}},
                               "training": {"lr": 0.005, "betas": [0.9, 0.999]}}


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                     st.floats(allow_nan=False))
_documents = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(_documents)
def test_strict_loader_agrees_with_safe_load_on_alias_free_documents(document):
    text = yaml.safe_dump(document)
    assert load_strict(text) == yaml.safe_load(text) == document


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text("abcxyz", min_size=1, max_size=4), st.integers(), min_size=1,
                       max_size=5), st.data())
def test_any_repeated_key_is_refused(mapping, data):
    key = data.draw(st.sampled_from(sorted(mapping)))
    text = yaml.safe_dump({"section": mapping}) + f"  {key}: 0\n"
    with pytest.raises(YAMLInputError, match=f"section.{key} is given twice"):
        load_strict(text)
