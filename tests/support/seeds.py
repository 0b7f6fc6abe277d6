"""Seeds of randomised tests: new every run, or the one a failure named, from its environment variable.

A fixed default seed tries the same cases every run and finds only what it found the
first time; a new seed each run keeps exploring. A failure names ``VARIABLE=seed``,
which replays it.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

__all__ = ("RunSeed", "run_seed")


@dataclass(frozen=True)
class RunSeed:
    variable: str
    value: int

    def __str__(self) -> str:
        """What to set to replay this run: ``VARIABLE=seed``."""
        return f"{self.variable}={self.value}"


def run_seed(variable: str) -> RunSeed:
    """``$variable`` if set (to replay a failure), else a new random seed."""
    text = os.environ.get(variable, "")
    if not text:
        return RunSeed(variable, random.randrange(2**32))
    try:
        return RunSeed(variable, int(text))
    except ValueError:
        raise ValueError(f"{variable} must be an integer seed, not {text!r}") from None
