"""A clock the test drives, for code that takes its clock as a parameter (the API rate limiter)."""

from __future__ import annotations


class RateClock:
    """The API rate limiter's clock, driven by the test: `now` seconds since the epoch."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
