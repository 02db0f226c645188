"""The stepwise JSON decoder gives exactly what json.loads gives, and refuses what it refuses
(Hypothesis over arbitrary JSON values and over arbitrary text)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_server import jsonsteps

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=5), kids, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_json, st.sampled_from([None, 0, 2]))
def test_same_values_as_json_loads(value, indent):
    text = json.dumps(value, indent=indent)
    assert jsonsteps.loads(text) == json.loads(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='[]{},:"\\ 0123456789.eE+-truefalsnNIiy\n', max_size=30))
def test_accepts_exactly_what_json_loads_accepts(text):
    try:
        want = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            jsonsteps.loads(text)
        return
    assert repr(jsonsteps.loads(text)) == repr(want)


def test_caps_the_top_level_list_early():
    with pytest.raises(jsonsteps.ListTooLong):
        jsonsteps.loads('{"items": [1, 2, 3, oops', "items", 2)  # refused before the bad tail is read
    assert jsonsteps.loads('{"items": [1, 2], "x": [1, 2, 3]}', "items", 2) == {"items": [1, 2], "x": [1, 2, 3]}
