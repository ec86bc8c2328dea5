"""Durations as fencectl takes them (coordinator/client/duration.h).

One non-negative integer immediately followed by one unit -- "500ms", "10s",
"2m", "1h" -- and nothing else: no spaces, fractions, signs, compound values
("1m30s") or upper-case units, at most 24 days. A datetime.timedelta is
accepted too (whole milliseconds, same bounds). Errors are ValueError naming
the value.
"""

import datetime

MAX_DURATION_MS = 24 * 24 * 3600 * 1000  # about 24 days, as fencectl
_MAX_DIGITS = 12
# Longest suffix first is not needed here: the unit is everything after the digits.
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def _fail(text, why):
    return ValueError(
        f"invalid duration {text!r}: {why} (use an integer and a unit: 500ms, 10s, 2m, 1h)")


def parse_duration_ms(value):
    """Milliseconds of `value`: a str like "10s" or a datetime.timedelta.

    Raises ValueError (bad text, negative or over 24 days) or TypeError
    (another type: a bare number would leave its unit to guessing).
    """
    if isinstance(value, datetime.timedelta):
        ms = value // datetime.timedelta(milliseconds=1)
        if ms < 0 or ms > MAX_DURATION_MS:
            raise ValueError(f"invalid duration {value!r}: must be within 0ms and 24 days")
        return ms
    if not isinstance(value, str):
        raise TypeError(f"a duration is a str like '10s' or '500ms' or a timedelta, not {value!r}")
    text = value
    if not text:
        raise _fail(text, "empty")
    digits = 0
    while digits < len(text) and "0" <= text[digits] <= "9":
        digits += 1
    if digits == 0:
        raise _fail(text, "must start with a digit")
    if digits > _MAX_DIGITS:
        raise _fail(text, "number too large")
    unit = text[digits:]
    if not unit:
        raise _fail(text, "missing unit")
    if unit not in _UNITS_MS:
        raise _fail(text, f"unknown unit {unit!r}")
    number = int(text[:digits])
    if number > MAX_DURATION_MS // _UNITS_MS[unit]:
        raise _fail(text, "longer than 24 days")
    return number * _UNITS_MS[unit]


def format_duration_ms(ms):
    """The largest unit that represents `ms` exactly: 1500 -> "1500ms", 10000 -> "10s"."""
    if ms == 0:
        return "0s"
    for unit in ("h", "m", "s"):
        if ms % _UNITS_MS[unit] == 0:
            return f"{ms // _UNITS_MS[unit]}{unit}"
    return f"{ms}ms"
