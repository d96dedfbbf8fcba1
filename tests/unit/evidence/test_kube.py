from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tarsy.evidence.detections import kube
from tarsy.evidence.parse import quantity

_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(_UNITS)))
def test_a_quantity_with_a_unit_is_its_number_times_the_unit(number: int, unit: str) -> None:
    assert quantity(f"{number}{unit}") == number * _UNITS[unit]


@given(st.integers(min_value=0, max_value=10**7))
def test_a_millicore_quantity_is_a_thousandth(number: int) -> None:
    assert quantity(f"{number}m") == pytest.approx(number / 1000)


@pytest.mark.parametrize("text", ["", "lots", "12Qi", "-"])
def test_text_that_is_not_a_quantity_is_none(text: str) -> None:
    assert quantity(text) is None


@given(st.integers(min_value=1, max_value=2**50))
def test_memory_text_reads_back_to_within_its_rounding(value: int) -> None:
    shown = quantity(kube.memory_text(value))
    assert shown is not None and abs(shown - value) <= 0.05 * value + 1


@pytest.mark.parametrize(
    ("cores", "text"), [(0.25, "250m"), (2.0, "2"), (3.92, "3920m"), (None, "unknown")]
)
def test_cpu_text_prints_cores_as_kubernetes_does(cores: float | None, text: str) -> None:
    assert kube.cpu_text(cores) == text


@pytest.mark.parametrize(
    ("image", "parts"),
    [
        ("nginx", ("nginx", "latest")),
        (
            "registry.example.com:5000/shop/api:3.2.0",
            ("registry.example.com:5000/shop/api", "3.2.0"),
        ),
        ("registry.example.com:5000/shop/api", ("registry.example.com:5000/shop/api", "latest")),
        ("shop/api:1@sha256:abc", ("shop/api", "@sha256:abc")),
    ],
)
def test_an_image_splits_into_repository_and_tag(image: str, parts: tuple[str, str]) -> None:
    assert kube.image_parts(image) == parts


def test_a_label_selector_honours_match_labels_and_expressions() -> None:
    have = {"app": "api", "tier": "web"}
    assert kube.selects({}, have)
    assert kube.selects({"matchLabels": {"app": "api"}}, have)
    assert not kube.selects({"matchLabels": {"app": "db"}}, have)
    expressions = [
        {"key": "tier", "operator": "In", "values": ["web", "edge"]},
        {"key": "canary", "operator": "DoesNotExist"},
    ]
    assert kube.selects({"matchExpressions": expressions}, have)
    assert not kube.selects(
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]}, have
    )
    assert not kube.selects({"matchExpressions": [{"key": "x", "operator": "Bogus"}]}, have)


def test_an_unreadable_time_is_none_and_a_time_prints_in_utc() -> None:
    assert kube.parse_time("yesterday") is None
    assert kube.stamp(kube.parse_time("2026-11-27T11:00:00+01:00")) == "2026-11-27T10:00:00Z"
