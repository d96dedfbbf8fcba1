"""Money: integer nano-dollars, exact sums, decimal strings in JSON, legacy floats read."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import BaseModel, ValidationError

from tarsy.money import (
    Money,
    decimal_string,
    dollars,
    format_usd,
    money_of,
    nanos_of_dollars,
    usd_float,
)


class _Priced(BaseModel):
    cost: Money = 0


@pytest.mark.parametrize(
    ("dollars_in", "nanos"),
    [
        ("0.000424", 424_000),
        (Decimal("12.5"), 12_500_000_000),
        (0.1, 100_000_000),
        (0.1 + 0.2, 300_000_000),  # 0.30000000000000004 as a float
        (1e-9, 1),
        ("0.0000000005", 0),  # half a nano-dollar rounds half-even, to 0
        ("0.0000000015", 2),
        (3, 3_000_000_000),
    ],
)
def test_dollars_convert_to_exact_nanodollars(
    dollars_in: Decimal | str | float, nanos: int
) -> None:
    assert nanos_of_dollars(dollars_in) == nanos


@pytest.mark.parametrize("bad", ["abc", "NaN", "Infinity", True])
def test_what_is_not_an_amount_is_refused(bad: str | bool) -> None:
    with pytest.raises(ValueError):
        nanos_of_dollars(bad)


@pytest.mark.parametrize(
    ("nanos", "text"),
    [
        (0, "0"),
        (424_000, "0.000424"),
        (12_000_000_000, "12"),
        (1, "0.000000001"),
        (-5, "-0.000000005"),
    ],
)
def test_nanodollars_read_as_plain_decimal_strings(nanos: int, text: str) -> None:
    assert decimal_string(nanos) == text
    assert nanos_of_dollars(text) == nanos
    assert dollars(nanos) == Decimal(text)


def test_ten_thousand_small_increments_sum_exactly() -> None:
    # What a float Increment could not do: 10,000 calls of $0.000212 are exactly $2.12.
    total = sum(nanos_of_dollars("0.000212") for _ in range(10_000))
    assert decimal_string(total) == "2.12"
    assert usd_float(total) == 2.12


@pytest.mark.parametrize(
    ("nanos", "shown"),
    [(0, "$0"), (50_000, "< $0.0001"), (12_340_000, "$0.0123"), (1_234_567_000_000, "$1,234.5670")],
)
def test_costs_are_shown_as_dollars(nanos: int, shown: str) -> None:
    assert format_usd(nanos) == shown


def test_the_field_reads_ints_as_nanodollars_and_floats_and_strings_as_dollars() -> None:
    assert _Priced.model_validate({"cost": 424_000}).cost == 424_000  # stored today
    assert _Priced.model_validate({"cost": 0.000424}).cost == 424_000  # stored by older versions
    assert _Priced.model_validate({"cost": "0.000424"}).cost == 424_000  # served by the api
    assert _Priced.model_validate({"cost": 0.0}).cost == 0


def test_the_field_is_an_int_in_documents_and_a_decimal_string_in_json() -> None:
    priced = _Priced(cost=424_000)
    assert priced.model_dump() == {"cost": 424_000}
    assert priced.model_dump(mode="json") == {"cost": "0.000424"}
    assert _Priced.model_validate_json(priced.model_dump_json()) == priced


@pytest.mark.parametrize("bad", [True, None, [1], "twelve"])
def test_the_field_refuses_what_is_not_money(bad: object) -> None:
    with pytest.raises(ValidationError):
        _Priced.model_validate({"cost": bad})
    with pytest.raises(ValueError):
        money_of(bad)
