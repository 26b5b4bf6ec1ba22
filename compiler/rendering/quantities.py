"""Kubernetes resource quantities (`500m`, `2Gi`, `1e3`) as exact numbers, for the downward
API's `resourceFieldRef` and for comparing what the API server stored with what was sent."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?"
)


_SUFFIX_FACTORS: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}


def parse_quantity(text: str) -> Fraction:
    """A Kubernetes resource quantity (`500m`, `2Gi`, `1e3`) as an exact number."""
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number = Fraction(match.group("number"))
    suffix = match.group("suffix") or ""
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:])
    return number * _SUFFIX_FACTORS[suffix]


def milli_value(quantity: Fraction) -> int:
    return math.ceil(quantity * 1000)
