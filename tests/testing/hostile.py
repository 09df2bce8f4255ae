"""Hostile values for the fuzz suites, described in JSON (the cases cross a process boundary to the watchdog's
workers): numbers of a pool (spelled where JSON cannot hold them), the numpy dtypes a value may be cast to, values
that are not numbers at all, and :func:`build`, the value a description stands for."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

#: numeric values of the pool (JSON cannot hold NaN or 2**64 as such: they are spelled)
NUMBERS = [
    0, 1, 2, 3, 9, 10, 11, -1, -3, 10**6, "2**31", "2**53+1", "2**63-1", "2**63", "-2**63", "-2**63-1", "2**64",
    "2**100", 2.0, 2.6, 0.5, 1.0, 0.0, "-0.0", -2.0, 1e300, "1e-320", "nan", "inf", "-inf", 9.999999, 1.0000001,
]  # fmt: skip
#: numpy dtypes a value may be cast to
DTYPES = [
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
    "float64", "longdouble", "complex64", "complex128",
]  # fmt: skip
#: values that are not numbers at all
OTHERS = ["none", "str-2", "bytes-2", "str-empty", "object", "dict", "decimal-2", "fraction-2", "complex-2"]


def _number(spelled: Any) -> Any:
    if isinstance(spelled, str):
        if spelled in ("nan", "inf", "-inf", "-0.0", "1e-320"):
            return float(spelled)
        return eval(spelled, {"__builtins__": {}})  # an integer expression of the pool above
    return spelled


def _other(name: str) -> Any:
    return {
        "none": None,
        "str-2": "2",
        "bytes-2": b"2",
        "str-empty": "",
        "object": object(),
        "dict": {"answer": 2},
        "decimal-2": Decimal(2),
        "fraction-2": Fraction(2),
        "complex-2": 2 + 0j,
    }[name]


def build(spec: dict[str, Any]) -> Any:
    """The value a spec describes: ``{"kind": "python" | "numpy" | "array" | "list" | "other", ...}``."""
    kind = spec["kind"]
    if kind == "other":
        return _other(spec["name"])
    if kind == "python":
        value = _number(spec["value"])
        return bool(value) if spec.get("bool") else value
    values = [_number(value) for value in spec["values"]]
    if kind == "list":
        return values if spec["depth"] == 1 else [values]
    with np.errstate(all="ignore"):
        array = np.array(values, dtype=spec["dtype"]).reshape(spec["shape"])
    if kind == "numpy":
        return array[()] if array.shape == () else array.reshape(-1)[0]
    return array


def buildable(spec: dict[str, Any]) -> bool:
    try:
        build(spec)
    except (OverflowError, ValueError, TypeError):  # e.g. 2**64 into int8: numpy refuses to build it
        return False
    return True
