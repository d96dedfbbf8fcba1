"""Money as integer nano-dollars: exact sums, exact increments, decimal strings in JSON.

Design constraints:

- A cost is an ``int`` of nano-dollars (10⁻⁹ USD) in memory and in Firestore, so
  ``firestore.Increment`` adds exactly (a binary float made 0.1 + 0.2 read
  0.30000000000000004). A nano-dollar is far below any per-token price, and an
  int64 holds about nine billion dollars.
- The api shows a cost as a decimal string of dollars (``"0.000424"``), never a
  float, so no client parses it into a binary float by accident; the CLI and
  pages show dollars (:func:`format_usd`).
- Documents written before this stored a float of dollars; such a value is still
  read (converted through its shortest decimal form, so ``0.000424`` reads as
  424,000 nano-dollars). A ``bool`` is not money.

:data:`Money` is the pydantic field type: it validates an ``int`` as nano-dollars,
a ``float`` as legacy dollars and a ``str``/``Decimal`` as dollars (what the api
serves), and serializes to a decimal string in JSON and to the ``int`` otherwise.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

NANOS_PER_DOLLAR = 1_000_000_000
_NANO = Decimal(1).scaleb(-9)


def nanos_of_dollars(dollars: Decimal | str | float | int) -> int:
    """Nano-dollars in ``dollars`` (a decimal, its string or a legacy float), half-even.

    Raises:
        ValueError: ``dollars`` is not a finite number (or is a ``bool``).
    """
    if isinstance(dollars, bool):
        raise ValueError("a bool is not an amount of money")
    try:
        # repr() of a float is its shortest round-tripping decimal: 0.000424, not its binary value.
        exact = Decimal(repr(dollars)) if isinstance(dollars, float) else Decimal(dollars)
    except InvalidOperation as e:
        raise ValueError(f"not an amount of dollars: {dollars!r}") from e
    if not exact.is_finite():
        raise ValueError(f"not an amount of dollars: {dollars!r}")
    return int((exact * NANOS_PER_DOLLAR).to_integral_value(rounding=ROUND_HALF_EVEN))


def dollars(nanos: int) -> Decimal:
    """The exact amount of dollars in ``nanos`` nano-dollars."""
    return Decimal(nanos) * _NANO


def decimal_string(nanos: int) -> str:
    """``nanos`` as a plain decimal string of dollars, no trailing zeros: ``"0.000424"``."""
    text = format(dollars(nanos), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def usd_float(nanos: int) -> float:
    """``nanos`` as a float of dollars: only for comparisons with configured limits and metrics."""
    return nanos / NANOS_PER_DOLLAR


def format_usd(nanos: int, places: int = 4) -> str:
    """A cost as a person reads it: ``$0.0123``, ``< $0.0001`` when tiny, ``$0`` for none."""
    if nanos <= 0:
        return "$0"
    smallest = Decimal(1).scaleb(-places)
    amount = dollars(nanos)
    if amount < smallest:
        return f"< ${smallest}"
    return f"${amount.quantize(smallest, rounding=ROUND_HALF_EVEN):,}"


def money_of(value: object) -> int:
    """Nano-dollars in a stored or served value: int nano-dollars, float dollars, decimal string.

    Raises:
        ValueError: ``value`` is not an amount of money.
    """
    if isinstance(value, bool):
        raise ValueError("a bool is not an amount of money")
    if isinstance(value, int):
        return value
    if isinstance(value, float | str | Decimal):
        return nanos_of_dollars(value)
    raise ValueError(f"not an amount of money: {value!r}")


Money = Annotated[
    int,
    BeforeValidator(money_of),
    PlainSerializer(decimal_string, return_type=str, when_used="json"),
]
"""Nano-dollars; a decimal string of dollars in JSON; legacy float dollars are read."""
