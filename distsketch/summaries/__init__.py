"""Mergeable, bounded summaries: chunk(block) -> state, merge(states), finalize."""

from distsketch.summaries.base import Summary
from distsketch.summaries.covariance import Covariance

__all__ = ["Covariance", "Summary"]
