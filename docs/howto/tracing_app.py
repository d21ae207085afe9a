"""A checkout whose tasks are traced: OpenTelemetry is set up when the module is imported."""

import os
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from shepherd import AgentRequest, App, WorkflowContext


def one_line(span: ReadableSpan) -> str:
    return span.to_json(indent=None) + "\n"


# Every process that imports this module (shepherd run, worker, submit) traces:
# here each writes its spans to a file of its own, spans-<pid>.jsonl.
spans = open(f"spans-{os.getpid()}.jsonl", "a", buffering=1)  # noqa: SIM115
provider = TracerProvider(resource=Resource.create({"service.name": "checkout"}))
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=spans, formatter=one_line)))
trace.set_tracer_provider(provider)

app = App()


@app.agent("payments.charge")
async def charge(request: AgentRequest) -> Any:
    return {"charged": request.payload["amount"]}


@app.agent("email.send")
async def send(request: AgentRequest) -> Any:
    return "sent"


@app.workflow("orders.checkout")
async def checkout(ctx: WorkflowContext, order: Any) -> Any:
    charged = await ctx.call("payments.charge", order)
    await ctx.call("email.send", order)
    return charged
