"""Mergeable, bounded summaries: chunk(block) -> state, merge(states), finalize."""

from distsketch.summaries.base import Summary
from distsketch.summaries.covariance import Covariance
from distsketch.summaries.landmarks import UniformLandmarks
from distsketch.summaries.sums import SumMerge, SumSummary

__all__ = ["Covariance", "SumMerge", "SumSummary", "Summary", "UniformLandmarks"]
