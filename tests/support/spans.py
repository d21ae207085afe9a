"""Spans as the OpenTelemetry SDK writes them, for the tracing tests.

A process under test exports each span as one JSON line (`span_file`: the
SDK's `ConsoleSpanExporter` writing `ReadableSpan.to_json()` to a file, span
by span); a test reads every process's file (`read_spans`) and follows each
span's parent up through all of them (`chain`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

#: A span as its JSON line reads.
Span = dict[str, Any]


def one_line(span: ReadableSpan) -> str:
    """A span as one JSON line."""
    return span.to_json(indent=None) + "\n"


def span_file(path: str) -> None:
    """Make this process's tracer provider write every span, as it ends, to `path`.

    The standard set-up an application does at import: a provider, a processor
    that exports each span when it ends (so a process stopped later loses
    none), and an exporter (here, the SDK's console exporter writing to a file).
    """
    out: IO[str] = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's life
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=one_line))
    )
    trace.set_tracer_provider(provider)


def read_spans(paths: Iterable[Path]) -> list[Span]:
    """Every span in the files (a missing file has none), each tagged with its file's name."""
    spans: list[Span] = []
    for path in paths:
        if not path.exists():
            continue
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        spans.extend({**json.loads(line), "file": path.name} for line in lines)
    return spans


def as_dicts(spans: Iterable[ReadableSpan]) -> list[Span]:
    """Spans from the SDK (an in-memory exporter's) as their JSON lines read."""
    return [json.loads(one_line(span)) for span in spans]


def span_id(span: Span) -> str:
    return str(span["context"]["span_id"])


def chain(span: Span, by_id: Mapping[str, Span]) -> list[Span]:
    """`span`, its parent, its parent's parent... as far as the spans known go."""
    found = [span]
    while (parent := found[-1].get("parent_id")) is not None and parent in by_id:
        found.append(by_id[parent])
        if len(found) > 100:
            raise AssertionError(f"a cycle of parents from {span['name']}")
    return found


def named(spans: Iterable[Span], prefix: str) -> list[Span]:
    """The spans whose name starts with `prefix`."""
    return [s for s in spans if s["name"].startswith(prefix)]
