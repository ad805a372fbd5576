"""Prometheus text exposition format 0.0.4, written by hand (no client library at runtime):
`# HELP` and `# TYPE` once per family, then its samples; label values escaped; floats as Go
prints them (NaN, +Inf). https://prometheus.io/docs/instrumenting/exposition_formats/"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Labels = Mapping[str, str]


@dataclass(frozen=True)
class Sample:
    value: float
    labels: Labels = field(default_factory=dict)
    suffix: str = ""  # _bucket, _sum, _count for histograms


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # counter, gauge, histogram
    help: str
    samples: tuple[Sample, ...]


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inside = ",".join(f'{key}="{_escape_label(str(value))}"' for key, value in labels.items())
    return "{" + inside + "}"


def render(families: Iterable[Family]) -> str:
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for sample in family.samples:
            lines.append(f"{family.name}{sample.suffix}{_labels(sample.labels)} "
                         f"{format_value(sample.value)}")
    return "\n".join(lines) + "\n"


def histogram_samples(bounds: Iterable[float], cumulative: Iterable[int], total: float,
                      count: int, labels: Labels | None = None) -> tuple[Sample, ...]:
    """The _bucket (cumulative, ending with +Inf), _sum and _count samples of one histogram."""
    base = dict(labels or {})
    samples = [Sample(float(c), {**base, "le": format_value(b)}, "_bucket")
               for b, c in zip([*bounds, math.inf], cumulative, strict=True)]
    samples.append(Sample(total, base, "_sum"))
    samples.append(Sample(float(count), base, "_count"))
    return tuple(samples)
