"""Label selectors in kubectl's `-l` syntax, parsed to check them before they are used.

The upgrade policy carries selectors as strings (`waitForCompletion.podSelector`,
`drain.podSelector`) that the API server parses only when the upgrade reaches a
node's wait or drain step; parsing them when the policy is read turns a stuck
upgrade into a clear error on the ClusterPolicy.  The grammar is the one of
apimachinery's `labels.Parse`.  Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final


@dataclasses.dataclass(frozen=True)
class SelectorRequirement:
    """One requirement of a label selector: `key`, `!key`, `key=v`, `key in (a,b)`, ..."""

    key: str
    # "exists", "!" (does not exist), "=", "!=", "in", "notin", ">", "<".
    operator: str
    values: tuple[str, ...] = ()


_TOKEN_RE: Final = re.compile(r"\s*(?:(==|!=|=|!|\(|\)|,|<|>)|([^\s,()=!<>]+))")
_OPERATORS: Final = frozenset({"==", "!=", "=", "!", "(", ")", ",", "<", ">"})
_LABEL_NAME_RE: Final = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE_RE: Final = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Marks the end of the token stream (no token is empty).
_END: Final = ""


def _check_key(key: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix)):
        raise ValueError(f"{key!r} has an invalid prefix (must be a DNS subdomain such as example.com)")
    if len(name) > 63 or not _LABEL_NAME_RE.match(name):
        raise ValueError(f"{key!r} is not a valid label key (alphanumerics, '-', '_', '.'; at most 63)")


def _check_value(value: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE_RE.match(value):
        raise ValueError(f"{value!r} is not a valid label value (alphanumerics, '-', '_', '.'; at most 63)")
    return value


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while text[position:].strip():
        match = _TOKEN_RE.match(text, position)
        if match is None:
            raise ValueError(f"unexpected character {text[position:].lstrip()[0]!r}")
        tokens.append(match.group(1) or match.group(2))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self._tokens = _tokens(text)
        self._position = 0

    def peek(self) -> str:
        return self._tokens[self._position] if self._position < len(self._tokens) else _END

    def take(self) -> str:
        token = self.peek()
        self._position += 1
        return token

    def key(self) -> str:
        key = self.take()
        if key == _END or key in _OPERATORS:
            raise ValueError(f"expected a label key, found {key or 'the end'!r}")
        _check_key(key)
        return key

    def value_list(self, key: str, operator: str) -> tuple[str, ...]:
        if self.take() != "(":
            raise ValueError(f"{key} {operator} needs a parenthesised list, e.g. {key} {operator} (a,b)")
        values: list[str] = []
        while True:
            value = self.take()
            if value in (",", ")", _END):
                raise ValueError(f"{key} {operator} (...) has an empty or unclosed value list")
            values.append(_check_value(value))
            closing = self.take()
            if closing == ")":
                return tuple(values)
            if closing != ",":
                raise ValueError(f"{key} {operator} (...) is missing a ',' or ')'")

    def requirement(self) -> SelectorRequirement:
        if self.peek() == "!":
            # !key: the label must not exist.
            self.take()
            return SelectorRequirement(self.key(), "!")
        key = self.key()
        following = self.peek()
        if following in (_END, ","):
            # key: the label must exist.
            return SelectorRequirement(key, "exists")
        if following in ("=", "==", "!="):
            # key=value, key!=value; an empty value is allowed.
            operator = "!=" if self.take() == "!=" else "="
            value = "" if self.peek() in (_END, ",") else self.take()
            return SelectorRequirement(key, operator, (_check_value(value),))
        if following in ("<", ">"):
            # key>n, key<n: numeric comparison.
            operator = self.take()
            value = self.take()
            if not value.lstrip("-").isdigit():
                raise ValueError(f"{key}{operator} needs an integer, found {value or 'the end'!r}")
            return SelectorRequirement(key, operator, (value,))
        if following in ("in", "notin"):
            # key in (a,b), key notin (a,b).
            operator = self.take()
            return SelectorRequirement(key, operator, self.value_list(key, operator))
        raise ValueError(f"unexpected {following!r} after {key!r} (expected =, !=, in, notin or ',')")

    def selector(self) -> tuple[SelectorRequirement, ...]:
        requirements: list[SelectorRequirement] = []
        while self.peek() != _END:
            requirements.append(self.requirement())
            separator = self.take()
            if separator == ",":
                if self.peek() == _END:
                    raise ValueError("the selector ends with ','")
            elif separator != _END:
                raise ValueError(f"expected ',' between requirements, found {separator!r}")
        return tuple(requirements)


def parse_label_selector(text: str) -> tuple[SelectorRequirement, ...]:
    """Parse a label selector; raises ValueError saying what is wrong.

    "" (or blanks) parses to no requirements.  Supports `key`, `!key`, `key=v`,
    `key==v`, `key!=v`, `key in (a,b)`, `key notin (a,b)`, `key>n`, `key<n`,
    separated by commas.
    """
    return _Parser(text).selector()
