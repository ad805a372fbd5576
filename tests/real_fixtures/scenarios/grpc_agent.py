"""A hand-written agent calling its tools over gRPC through a channel instrumented by the real
opentelemetry-instrumentation-grpc. docs/conventions.md row 12 names each CLIENT span
`rpc.service/rpc.method`; §3 rule 3 classes it by its gRPC status code."""

from __future__ import annotations

import grpc
from harness import (
    CLIENT_TIMEOUT_S,
    GENEROUS_TIMEOUT_S,
    GRPC_TARGET,
    Truth,
    root_span,
    trace_id_of,
    tracer_provider,
)
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import GrpcInstrumentorClient

SERVICE = "tools.Tools"


def main() -> None:
    provider = tracer_provider("grpc-tools-agent")
    GrpcInstrumentorClient().instrument()
    tracer = trace.get_tracer("grpc-agent")
    truth = Truth("grpc", ["opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http",
                           "opentelemetry-instrumentation-grpc", "grpcio"])
    channel = grpc.insecure_channel(GRPC_TARGET)

    def call(run, method: str, expect: grpc.StatusCode, cls: str) -> None:
        stub = channel.unary_unary(f"/{SERVICE}/{method}")
        timeout = CLIENT_TIMEOUT_S if method == "Slow" else GENEROUS_TIMEOUT_S
        with run.step("other", f"{SERVICE}/{method}", cls, f"gRPC {method}"):
            try:
                stub(b"report-7", timeout=timeout)
                code = grpc.StatusCode.OK
            except grpc.RpcError as error:
                code = error.code()
        assert code == expect, (method, code)

    # Run 1: the deadline (150 ms) falls inside the call that hits the client deadline, which
    # comes first so that the others' speed cannot move it.
    with truth.run("grpc-tools-agent", 150, note="deadline inside the DEADLINE_EXCEEDED call") \
            as run, root_span(tracer, run, "grpc run",
                                                 attributes={"budget.total_ms": 150}) as root:
        run.trace_id = trace_id_of(root)
        call(run, "Slow", grpc.StatusCode.DEADLINE_EXCEEDED, "client_timeout")
        call(run, "Ok", grpc.StatusCode.OK, "ok")
        call(run, "Unavailable", grpc.StatusCode.UNAVAILABLE, "upstream_error")
        call(run, "Exhausted", grpc.StatusCode.RESOURCE_EXHAUSTED, "upstream_error")

    # Run 2: within budget; the slow success is the culprit, the last call the holder.
    with truth.run("grpc-tools-agent", 10_000, note="within budget") as run, \
            root_span(tracer, run, "grpc run",
                                         attributes={"budget.total_ms": 10_000}) as root:
        run.trace_id = trace_id_of(root)
        call(run, "Unavailable", grpc.StatusCode.UNAVAILABLE, "upstream_error")
        call(run, "Delay", grpc.StatusCode.OK, "ok")
        call(run, "Ok", grpc.StatusCode.OK, "ok")

    channel.close()
    provider.shutdown()
    truth.write()


if __name__ == "__main__":
    main()
