"""Budgets in the config (docs/budgets.md): the price table, [budget], the per-task keys' default and ceiling.

Every bad value is a ConfigError naming its key and showing the value, whatever the value: a property
over generated bad values for every budget key, with the cases it found kept as examples.
"""

from __future__ import annotations

import json
import math
import tempfile
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.budget import MAX_AMOUNT, MAX_TOKENS_LIMIT, describe_cost, format_money
from cud.daemon.budget.config import Price
from cud.daemon.budget.cost import cost_of
from cud.daemon.config import load_config
from cud.errors import ConfigError, SpecError
from cud.spec import parse_spec

BASE = {"socket": "/tmp/s", "state_dir": "/tmp/x"}
ENV = {"DISPLAY": ":7"}
#: Where each budget key is written: (its table's head, its name, the key path an error names).
MONEY_KEYS = [("", "max_cost", "max_cost"), ("[budget]", "daily_cost", "budget.daily_cost"),
              ('[budget.prices."gpt-x"]\noutput = 1', "input", 'budget.prices."gpt-x".input'),
              ('[budget.prices."gpt-x"]\ninput = 1', "output", 'budget.prices."gpt-x".output'),
              ('[budget.prices."gpt-x"]\ninput = 1\noutput = 1', "cached_input", 'budget.prices."gpt-x".cached_input')]
TOKEN_KEYS = [("", "max_input_tokens", "max_input_tokens"), ("", "max_output_tokens", "max_output_tokens")]


def toml_value(value: object) -> str:
    """A value as TOML writes it (its strings are JSON's, which TOML's basic strings read alike)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else "inf" if value == math.inf else "-inf" if value == -math.inf \
            else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")  # TOML escapes DEL too
    return str(value)


def load(text: str):  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cud.toml"
        path.write_text(text)
        return load_config(path, BASE, env=ENV)


def error_of(head: str, name: str, value: object) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load(f"{head}\n{name} = {toml_value(value)}\n")
    return caught.value


def test_a_price_table_and_budgets_are_read_exactly() -> None:
    config = load("""
max_cost = 2.10
max_output_tokens = 50_000
[budget]
currency = "eur"
daily_cost = "0.1"
on_budget = "fail"
[budget.prices."gpt-5.4"]
input = 1.25
output = 10
[budget.prices.cheap]
input = 0.1
cached_input = 0.01
output = 0.4
""")
    assert config.max_cost == Decimal("2.10") and config.max_output_tokens == 50_000 and config.max_input_tokens is None
    assert config.budget.currency == "EUR" and config.budget.daily_cost == Decimal("0.1")
    assert config.budget.on_budget == "fail"
    # cached_input defaults to input's price: never a guess below what the contract says.
    assert config.budget.price("gpt-5.4") == Price(Decimal("1.25"), Decimal("1.25"), Decimal(10))
    assert config.budget.price("cheap") == Price(Decimal("0.1"), Decimal("0.01"), Decimal("0.4"))
    assert config.budget.price("other") is None
    defaults = load("")
    assert defaults.budget.on_budget == "ask" and defaults.budget.prices == {} and defaults.max_cost is None


def test_a_cost_is_exact_and_the_cached_part_is_priced_apart() -> None:
    price = Price(Decimal("0.1"), Decimal("0.01"), Decimal("0.4"))
    # 0.1 ten times as floats is 0.9999999999999999; as Decimals, a million answers sum exactly.
    one = cost_of({"input_tokens": 1_000_000, "cached_tokens": 0, "output_tokens": 0}, price)
    assert sum([one] * 10, Decimal(0)) == Decimal(1)
    mixed = cost_of({"input_tokens": 3_000, "cached_tokens": 1_000, "output_tokens": 500}, price)
    assert mixed == Decimal("0.00041")  # 2,000 at 0.1/M + 1,000 at 0.01/M + 500 at 0.4/M
    assert format_money(mixed, "USD") == "$0.00041" and format_money(Decimal(2), "EUR") == "€2.00"
    assert format_money(Decimal("3.5"), "CHF") == "3.50 CHF"
    # To the cent; under ten cents two significant digits; never a long tail of decimals nor "$0.00" for a cost.
    shown = [format_money(Decimal(text), "USD") for text in ("0.83333333", "12.3456789", "0.01234567", "0.075",
                                                              "0.0999", "0.05", "1234.5", "0", "0.00000001")]
    assert shown == ["$0.83", "$12.35", "$0.012", "$0.075", "$0.10", "$0.05", "$1,234.50", "$0.00", "$0.00000001"]
    assert describe_cost({"amount": None, "currency": "USD", "unknown": "no price for model 'x'"}) == \
        "unknown (no price for model 'x')"
    assert describe_cost(None) == "none yet"


@pytest.mark.parametrize(("text", "key", "shown"), [
    ("[budget]\ncurrency = 'dollars'", "budget.currency", "'dollars'"),
    ("[budget]\non_budget = 'pause'", "budget.on_budget", "'pause'"),
    ("[budget]\nprices = 3", "budget.prices", "3"),
    ("[budget]\ndaily_cost = 0", "budget.daily_cost", "0"),
    ("[budget.prices.m]\ninput = 1", "budget.prices.\"m\".output", "None"),
    ("[budget.prices.m]\noutput = 1", "budget.prices.\"m\".input", "None"),
    ("[budget.prices.m]\ninput = -0.5\noutput = 1", "budget.prices.\"m\".input", "-0.5"),
    ("[budget.prices.m]\ninput = 1\noutput = 1\ncachd_input = 1", "budget.prices.\"m\".cachd_input", None),
    ("max_cost = 'two'", "max_cost", "'two'"),
    ("max_input_tokens = 0", "max_input_tokens", "0"),
])
def test_bad_budget_values_name_the_key_and_the_value(text: str, key: str, shown: str | None) -> None:
    with pytest.raises(ConfigError) as caught:
        load(text)
    assert caught.value.details["key"] == key, caught.value.message
    assert repr(key) in caught.value.message
    if shown is not None:
        assert caught.value.details["value"] == shown and shown in caught.value.message


#: Values no amount of money may be: not numbers, not finite, negative, too big, too fine.
BAD_AMOUNTS = st.one_of(
    st.booleans(),
    st.lists(st.integers(0, 9), max_size=2),
    st.floats(allow_nan=True, allow_infinity=True).filter(lambda f: not math.isfinite(f) or f < 0),
    st.integers(max_value=-1),
    st.integers(min_value=int(MAX_AMOUNT) + 1, max_value=1 << 62),
    st.text(max_size=12).filter(lambda t: not _is_decimal(t)),
    st.decimals(min_value=0, max_value=1, places=14, allow_nan=False).filter(
        lambda d: d != d.quantize(Decimal(1).scaleb(-12))).map(str),
)
#: Values no token budget may be: zero or less, past the limit, not integers.
BAD_TOKENS = st.one_of(st.booleans(), st.integers(max_value=0), st.integers(MAX_TOKENS_LIMIT + 1, 1 << 62),
                       st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))


def _is_decimal(text: str) -> bool:
    try:
        return Decimal(text.strip()).is_finite() and Decimal(text.strip()) >= 0
    except ArithmeticError:
        return False


@settings(max_examples=150, deadline=None)
@given(where=st.sampled_from(MONEY_KEYS), value=BAD_AMOUNTS)
@example(where=MONEY_KEYS[0], value="1e-13")
@example(where=MONEY_KEYS[1], value=-0.0)
@example(where=MONEY_KEYS[3], value=float("nan"))
def test_any_bad_amount_at_any_money_key_is_refused_by_name(where: tuple[str, str, str], value: object) -> None:
    head, name, key = where
    if key.startswith("budget.prices") and value in (0, 0.0, "0", -0.0):
        return  # a price may be 0 (a free model); every other money key must be more
    error = error_of(head, name, value)
    assert error.details["key"] == key, error.message
    assert error.message.startswith(f"config key {key!r} must be an amount of money"), error.message


@settings(max_examples=100, deadline=None)
@given(where=st.sampled_from(TOKEN_KEYS), value=BAD_TOKENS)
def test_any_bad_token_budget_is_refused_by_name(where: tuple[str, str, str], value: object) -> None:
    head, name, key = where
    error = error_of(head, name, value)
    assert error.details["key"] == key and error.message.startswith(f"config key {key!r} must be an integer")


def test_a_specs_budgets_are_submits_and_checked_alike() -> None:
    spec = parse_spec({"prompt": "p", "max_cost": 0.1, "max_output_tokens": 500})
    assert spec.max_cost == "0.1" and spec.task_fields()["max_cost"] == "0.1"  # exact, however it was written
    assert parse_spec(spec.to_dict()) == spec
    with pytest.raises(SpecError) as caught:
        parse_spec({"prompt": "p", "max_cost": -1})
    assert caught.value.message == "spec key 'max_cost' must be an amount of money: a number > 0, got -1"
    with pytest.raises(SpecError, match="spec key 'max_input_tokens' must be an integer from 1 to"):
        parse_spec({"prompt": "p", "max_input_tokens": 0})
