"""A small, strict parser of the Prometheus text exposition format (0.0.4), for tests: it
refuses what Prometheus would refuse (a sample before its TYPE, a family declared twice, a bad
label or value, a histogram whose buckets are not cumulative or lack +Inf) instead of guessing."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^(?P<name>{_NAME})(?:\{{(?P<labels>.*)\}})? (?P<value>\S+)$")
_LABEL = re.compile(r'\s*(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"\s*(,|$)')
_KINDS = {"counter", "gauge", "histogram", "summary", "untyped"}
_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}


class ExpositionError(ValueError):
    pass


@dataclass
class MetricFamily:
    name: str
    kind: str
    help: str = ""
    # (sample name, labels as a sorted tuple of pairs) → value
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    def value(self, suffix: str = "", **labels: str) -> float:
        return self.samples[(self.name + suffix, tuple(sorted(labels.items())))]


def _float(text: str) -> float:
    if text in ("NaN", "+Inf", "-Inf"):
        return {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf}[text]
    try:
        return float(text)
    except ValueError:
        raise ExpositionError(f"bad sample value {text!r}") from None


def _labels(text: str | None) -> tuple[tuple[str, str], ...]:
    if not text:
        return ()
    pairs, position = [], 0
    while position < len(text):
        match = _LABEL.match(text, position)
        if match is None:
            raise ExpositionError(f"bad labels {text!r}")
        value = re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m[1], m[1]), match["value"])
        pairs.append((match["key"], value))
        position = match.end()
    if len({k for k, _ in pairs}) != len(pairs):
        raise ExpositionError(f"repeated label in {text!r}")
    return tuple(sorted(pairs))


def parse(text: str) -> dict[str, MetricFamily]:
    if not text.endswith("\n"):
        raise ExpositionError("exposition must end with a newline")
    families: dict[str, MetricFamily] = {}
    current: MetricFamily | None = None
    helps: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            if name in helps:
                raise ExpositionError(f"line {number}: second HELP for {name}")
            helps[name] = help_text
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            if name in families:
                raise ExpositionError(f"line {number}: second TYPE for {name}")
            if kind not in _KINDS or not re.fullmatch(_NAME, name):
                raise ExpositionError(f"line {number}: bad TYPE line {line!r}")
            current = families[name] = MetricFamily(name, kind, helps.get(name, ""))
        elif line.startswith("#") or not line.strip():
            continue
        else:
            match = _SAMPLE.match(line)
            if match is None:
                raise ExpositionError(f"line {number}: not a sample: {line!r}")
            if current is None or match["name"] not in [
                    current.name + suffix for suffix in _SUFFIXES.get(current.kind, ("",))]:
                raise ExpositionError(f"line {number}: sample {match['name']} outside its "
                                      "family's TYPE block")
            key = (match["name"], _labels(match["labels"]))
            if key in current.samples:
                raise ExpositionError(f"line {number}: duplicate sample {line!r}")
            current.samples[key] = _float(match["value"])
    for family in families.values():
        if family.kind == "histogram":
            _check_histogram(family)
    return families


def _check_histogram(family: MetricFamily) -> None:
    buckets = sorted((_float(dict(labels)["le"]), value)
                     for (name, labels), value in family.samples.items()
                     if name == family.name + "_bucket")
    if not buckets or buckets[-1][0] != math.inf:
        raise ExpositionError(f"{family.name}: no +Inf bucket")
    counts = [value for _, value in buckets]
    if counts != sorted(counts):
        raise ExpositionError(f"{family.name}: buckets are not cumulative")
    if counts[-1] != family.value("_count"):
        raise ExpositionError(f"{family.name}: +Inf bucket differs from _count")
