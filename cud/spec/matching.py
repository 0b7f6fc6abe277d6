"""How a spec compares text: ``re:`` then a regular expression searched in the value, else the exact value.

One convention for every string a spec expects (a file's content, a window's class or
title, an element's name or text, the model's answer, a command's output):

* ``"re:PATTERN"``: Python's ``re.search(PATTERN, value)``: found anywhere unless the
  pattern anchors itself (``^``, ``$``, ``\\A``, ``\\Z``); case-sensitive unless it says
  ``(?i)``; ``(?m)`` makes ``^``/``$`` match at each line;
* anything else: the whole value, exactly (case and whitespace count).

Lists of plain substrings (a command's ``output.include``/``exclude``) are the one
exception, and say so by their name. Policy rules (docs/targets.md) use globs instead:
they pick out what an action touches, where a spec asserts a value.
"""

from __future__ import annotations

import dataclasses
import re
import warnings

__all__ = ("REGEX_PREFIX", "Match", "compile_regex")

REGEX_PREFIX = "re:"


def compile_regex(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A person's ``re:`` pattern compiled (a spec's or a policy rule's); re.error if it is not one."""
    with warnings.catch_warnings():
        # "Possible nested set" (a '[[' or '--'): a FutureWarning about what a later Python may
        # read differently. The pattern compiles and means today what it always has.
        warnings.simplefilter("ignore", FutureWarning)
        return re.compile(pattern, flags)


@dataclasses.dataclass(frozen=True)
class Match:
    """One expected string as written in the spec; two are equal when written alike."""

    text: str
    regex: re.Pattern[str] | None = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> Match:
        """``text`` as a Match; re.error (from ``re.compile``) for a bad ``re:`` pattern."""
        if text.startswith(REGEX_PREFIX):
            return cls(text, compile_regex(text[len(REGEX_PREFIX):]))
        return cls(text)

    def test(self, value: str) -> bool:
        if self.regex is not None:
            return self.regex.search(value) is not None
        return value == self.text

    def describe(self) -> str:
        """What is expected, in words: ``matches /PATTERN/`` or ``is 'TEXT'``."""
        if self.regex is not None:
            return f"matches /{self.regex.pattern}/"
        return f"is {self.text!r}"

    def describe_miss(self) -> str:
        """The opposite, in words: ``does not match /PATTERN/`` or ``is not 'TEXT'``."""
        if self.regex is not None:
            return f"does not match /{self.regex.pattern}/"
        return f"is not {self.text!r}"
