"""Every Summary subclass in the package lives in ``distsketch.summaries`` and has a
conformance test class."""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import pkgutil

import distsketch
from distsketch.summaries import Summary
from distsketch.testing import MergeableSummaryTests

HERE = pathlib.Path(__file__).resolve().parent


def _subclasses(cls):
    for s in cls.__subclasses__():
        yield s
        yield from _subclasses(s)


def test_every_summary_subclass_has_a_conformance_test():
    for mod in pkgutil.walk_packages(distsketch.__path__, "distsketch."):
        importlib.import_module(mod.name)
    summaries = {c for c in _subclasses(Summary) if c.__module__.startswith("distsketch.")}
    modules = []  # held: __subclasses__ keeps only weak references to the test classes
    for path in sorted(HERE.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_coverage_{path.stem}", path)
        modules.append(importlib.util.module_from_spec(spec))
        spec.loader.exec_module(modules[-1])
    tested = {type(t().make_summary()) for t in _subclasses(MergeableSummaryTests)}
    # discovery really walked the package: the shared summaries and the estimators' passes
    names = {c.__qualname__ for c in summaries}
    assert {"Covariance", "UniformLandmarks", "FrequentDirectionsSummary", "RidgeSummary",
            "BlockedCovariance", "FalkonPass", "StripSummary"} <= names
    missing = sorted(f"{c.__module__}.{c.__qualname__}" for c in summaries - tested)
    assert not missing, f"summaries without a MergeableSummaryTests subclass: {missing}"


def test_every_summary_lives_in_the_summaries_package():
    """Estimators compose summaries: no ``Summary`` subclass is defined in another layer."""
    for mod in pkgutil.walk_packages(distsketch.__path__, "distsketch."):
        importlib.import_module(mod.name)
    elsewhere = sorted(f"{c.__module__}.{c.__qualname__}" for c in _subclasses(Summary)
                       if c.__module__.startswith("distsketch.")
                       and not c.__module__.startswith("distsketch.summaries."))
    assert not elsewhere, f"Summary subclasses outside distsketch.summaries: {elsewhere}"
