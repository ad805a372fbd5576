"""The bundled sample traces: reproducible, valid OTLP JSON, and telling the story they promise.

Everything here is computed from the generated data with plain Python (no budgetscope modules),
so these checks also pin down what the ingest and the queries will be fed.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from sample_traces import generate
from sample_traces.otlp_encode import batch_to_json, batch_to_pb_bytes, batch_to_proto
from sample_traces.policy import BASELINE, TIGHTENED

CUTOFF_NS = int(dt.datetime(2026, 11, 30, tzinfo=dt.UTC).timestamp()) * 10**9
HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")


def _value(any_value: dict) -> object:
    (kind, value), = any_value.items()
    return int(value) if kind == "intValue" else value


def _attrs(items: list[dict]) -> dict:
    return {kv["key"]: _value(kv["value"]) for kv in items}


@pytest.fixture(scope="module")
def requests() -> list[dict]:
    return list(generate.read_jsonl(generate.SAMPLE_PATH))


@pytest.fixture(scope="module")
def traces(requests: list[dict]) -> dict[str, list[dict]]:
    """trace id -> spans, each span with `attrs` decoded and `service` from its resource."""
    out: dict[str, list[dict]] = defaultdict(list)
    for request in requests:
        for resource_spans in request["resourceSpans"]:
            service = _attrs(resource_spans["resource"]["attributes"])["service.name"]
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    span["attrs"] = _attrs(span["attributes"])
                    span["service"] = service
                    out[span["traceId"]].append(span)
    return out


@pytest.fixture(scope="module")
def runs(traces: dict[str, list[dict]]) -> list[dict]:
    """One record per trace: root span, steps (descendants with a step attribute), week."""
    records = []
    for spans in traces.values():
        (root,) = [s for s in spans if "parentSpanId" not in s]
        steps = [s for s in spans if s is not root and (
            "budget.step.kind" in s["attrs"] or "gen_ai.operation.name" in s["attrs"])]
        start = dt.datetime.fromtimestamp(int(root["startTimeUnixNano"]) / 1e9, dt.UTC)
        year, week, _ = start.isocalendar()
        records.append({"root": root, "spans": spans, "steps": steps,
                        "week": f"{year}-W{week:02d}", "outcome": root["attrs"].get(
                            "budget.run.outcome")})
    return records


def _duration_ms(span: dict) -> float:
    return (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) / 1e6


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _outcomes(runs: list[dict]) -> Counter:
    return Counter(s["attrs"].get("budget.outcome") for r in runs for s in r["steps"])


# ---- reproducibility and format ---------------------------------------------------------------


@pytest.mark.slow
def test_default_arguments_regenerate_the_committed_sample(tmp_path: Path) -> None:
    out = tmp_path / "sample.jsonl.gz"
    assert generate.main(["--out", str(out)]) == 0
    committed = generate.SAMPLE_PATH.read_bytes()
    # Content first, for a readable failure; then the gzip bytes (mtime 0, no file name).
    assert gzip.decompress(out.read_bytes()) == gzip.decompress(committed)
    assert out.read_bytes() == committed


def test_sample_is_small_enough_to_commit() -> None:
    assert generate.SAMPLE_PATH.stat().st_size <= 4 * 1024 * 1024


def test_every_line_is_one_otlp_json_request(requests: list[dict]) -> None:
    # The fixture parsed each line with json.loads; here: the shape of each request.
    assert len(requests) > 1_000
    for request in requests:
        assert list(request) == ["resourceSpans"]
        for resource_spans in request["resourceSpans"]:
            assert "service.name" in _attrs(resource_spans["resource"]["attributes"])
            for scope_spans in resource_spans["scopeSpans"]:
                assert scope_spans["scope"]["name"]
                assert 0 < len(scope_spans["spans"]) <= 512


def test_ids_parents_and_timestamps(traces: dict[str, list[dict]]) -> None:
    for trace_id, spans in traces.items():
        assert HEX32.match(trace_id)
        ids = {s["spanId"] for s in spans}
        assert len(ids) == len(spans), "span ids are unique within a trace"
        roots = 0
        for span in spans:
            assert HEX16.match(span["spanId"])
            assert isinstance(span["kind"], int)
            assert isinstance(span["startTimeUnixNano"], str)
            start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
            assert start <= end < CUTOFF_NS
            assert span["status"].get("code", 0) in (0, 1, 2)
            for link in span.get("links", []):
                assert HEX32.match(link["traceId"]) and HEX16.match(link["spanId"])
            if "parentSpanId" in span:
                assert HEX16.match(span["parentSpanId"])
                assert span["parentSpanId"] in ids, "parent exists in the same trace"
            else:
                roots += 1
        assert roots == 1


def test_attribute_values_are_typed_like_otlp(traces: dict[str, list[dict]]) -> None:
    seen = Counter()
    for spans in traces.values():
        for span in spans:
            for kv in span["attributes"]:
                (kind, value), = kv["value"].items()
                seen[kind] += 1
                if kind == "intValue":  # 64-bit integers are JSON strings in OTLP
                    assert value.__class__ is str and value.lstrip("-").isdigit()
                elif kind == "boolValue":
                    assert value.__class__ is bool
                elif kind == "doubleValue":  # budget.total_usd
                    assert value.__class__ in (int, float)
                else:
                    assert kind == "stringValue" and value.__class__ is str
    assert {"stringValue", "intValue", "boolValue", "doubleValue"} <= set(seen)


# ---- the story --------------------------------------------------------------------------------


def test_volume_agents_and_weeks(runs: list[dict]) -> None:
    assert 1_500 <= len(runs) <= 2_000
    agents = Counter(r["root"]["attrs"]["gen_ai.agent.name"] for r in runs)
    assert len(agents) >= 3 and min(agents.values()) >= 100
    services = {(r["root"]["attrs"]["gen_ai.agent.name"], r["root"]["service"]) for r in runs}
    assert any(agent != service for agent, service in services)
    weeks = Counter(r["week"] for r in runs)
    assert len(weeks) >= 4 and set(weeks) <= {f"2026-W{w}" for w in range(44, 49)}
    weekdays = Counter(int(r["root"]["startTimeUnixNano"]) // (86_400 * 10**9) % 7 for r in runs)
    assert max(weekdays.values()) > 2 * min(weekdays.values()), "weekends are quieter"


def test_steps_per_run_and_step_mix(runs: list[dict]) -> None:
    assert 15 <= statistics.mean(len(r["steps"]) for r in runs) <= 25
    kinds = Counter(s["attrs"].get("budget.step.kind") for r in runs for s in r["steps"])
    assert {"model", "tool", "subagent", "backoff", "queue", "reconcile"} <= set(kinds)
    ops = Counter(s["attrs"].get("gen_ai.operation.name") for r in runs for s in r["steps"])
    assert {"chat", "execute_tool", "invoke_agent"} <= set(ops)


def test_parallel_branches_and_nested_spans(runs: list[dict]) -> None:
    parallel = nested_steps = client_spans = 0
    for run in runs:
        root_id = run["root"]["spanId"]
        top = sorted((int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"]))
                     for s in run["steps"] if s.get("parentSpanId") == root_id)
        parallel += any(b[0] < a[1] for a, b in zip(top, top[1:], strict=False))
        step_ids = {s["spanId"] for s in run["steps"]}
        nested_steps += sum(s.get("parentSpanId") in step_ids for s in run["steps"])
        client_spans += sum(s["kind"] == 3 and s not in run["steps"] for s in run["spans"])
    assert parallel > 100 and nested_steps > 500 and client_spans > 10_000


def test_run_budgets_and_outcomes(runs: list[dict]) -> None:
    budgets = Counter(r["root"]["attrs"].get("budget.total_ms") for r in runs)
    assert {30_000, 60_000} <= set(budgets) and budgets[None] > 0, "a few runs have no budget"
    assert any("budget.deadline_unix_ms" in r["root"]["attrs"] for r in runs)
    assert any("budget.reserve_ms" in r["root"]["attrs"] for r in runs)
    outcomes = Counter(r["outcome"] for r in runs)
    assert {"completed", "partial", "exhausted", "failed", "cancelled"} <= set(outcomes)
    assert outcomes["exhausted"] + outcomes["partial"] >= 30


def test_allocation_is_min_of_cap_and_remaining_less_reserve(runs: list[dict]) -> None:
    """The SDK's slice: min(cap, remaining - reserve) for the run's own steps (the landing may
    spend the reserve: min(cap, remaining)); a subagent's or a retrying tool's steps spend a
    slice with no reserve of its own."""
    checked = landings = 0
    for run in runs:
        root = run["root"]
        reserve = root["attrs"].get("budget.reserve_ms", 0)
        for step in run["steps"]:
            a = step["attrs"]
            if "budget.allocated_ms" not in a:
                continue
            remaining = a["budget.remaining_ms"]
            cap = a.get("budget.cap_ms", remaining)
            at_top = step.get("parentSpanId") == root["spanId"]
            expected = min(cap, remaining - reserve) if at_top else min(cap, remaining)
            # Milliseconds are rounded from the SDK's seconds: at most 1 ms apart.
            if abs(a["budget.allocated_ms"] - expected) <= 1:
                checked += 1
            else:
                # Only a landing (a model call refused nothing is left for) spends the reserve.
                assert at_top and a["budget.step.kind"] == "model", step
                assert remaining - reserve < 1_500
                assert abs(a["budget.allocated_ms"] - min(cap, remaining)) <= 1
                landings += 1
    assert checked > 20_000
    assert landings > 0


def test_fetch_report_latency_is_heavy_tailed(runs: list[dict]) -> None:
    ok = [_duration_ms(s) for r in runs for s in r["steps"]
          if s["attrs"].get("budget.step.name") == "fetch_report"
          and s["attrs"].get("budget.outcome") == "ok"]
    assert len(ok) > 1_000
    assert 300 <= _percentile(ok, 0.50) <= 550
    assert 2_500 <= _percentile(ok, 0.95) <= 5_000
    assert 6_000 <= _percentile(ok, 0.99) <= 13_000


def test_client_timeouts_and_upstream_failures_hit_different_dependencies(
        runs: list[dict]) -> None:
    by_tool: dict[str, Counter] = defaultdict(Counter)
    for run in runs:
        for step in run["steps"]:
            a = step["attrs"]
            by_tool[a.get("budget.step.name")][a.get("budget.outcome")] += 1
    report, search = by_tool["fetch_report"], by_tool["search_api"]
    assert report["client_timeout"] > 2 * report["upstream_error"]
    assert search["upstream_error"] > 2 * search["client_timeout"]
    spans = [s for r in runs for s in r["steps"]]
    assert any(s["attrs"].get("http.response.status_code") == 503 and s["status"].get("code") == 2
               for s in spans)
    assert any(s["attrs"].get("rpc.grpc.status_code") == 14 for s in spans)
    assert any(s["attrs"].get("rpc.response.status_code") == "DEADLINE_EXCEEDED" for s in spans)
    timeouts = [s for s in spans if s["attrs"].get("budget.outcome") == "client_timeout"]
    assert all("budget.cleanup_ms" in s["attrs"] for s in timeouts)
    assert sum(s["attrs"].get("error.type") == "TimeoutError" for s in timeouts) > 50


def test_refusals_retries_and_hedges(runs: list[dict]) -> None:
    outcomes = _outcomes(runs)
    assert outcomes["refused"] >= 10
    refused = [s for r in runs for s in r["steps"] if s["attrs"].get("budget.outcome") == "refused"]
    assert all(_duration_ms(s) < 1 and "budget.allocated_ms" not in s["attrs"] for s in refused)
    attempts = Counter(s["attrs"].get("budget.attempt") for r in runs for s in r["steps"])
    assert attempts[2] > 50 and attempts[3] > 0
    assert sum(s["attrs"].get("budget.hedge") is True for r in runs for s in r["steps"]) > 10


def test_exhausted_runs_blame_early_steps_while_later_ones_hold_the_deadline(
        runs: list[dict]) -> None:
    # A simplified docs/metrics.md §4 (no sharing of parallel time): enough to see both shapes.
    same = different = 0
    for run in runs:
        root = run["root"]
        if run["outcome"] not in ("exhausted", "partial"):
            continue
        start = int(root["startTimeUnixNano"])
        deadline = start + root["attrs"]["budget.total_ms"] * 10**6
        if "budget.deadline_unix_ms" in root["attrs"]:
            deadline = root["attrs"]["budget.deadline_unix_ms"] * 10**6
        top = [s for s in run["steps"] if s.get("parentSpanId") == root["spanId"]]
        culprit = max(top, key=_duration_ms)
        active = [s for s in top if int(s["startTimeUnixNano"]) <= deadline
                  <= int(s["endTimeUnixNano"])]
        holder = max(active or top, key=lambda s: int(s["startTimeUnixNano"]))
        same += culprit is holder
        different += culprit is not holder
    assert different >= 10 and same >= 5


def test_writes_reconciliations_and_orphans(runs: list[dict]) -> None:
    results = Counter()
    orphans = linked = 0
    for run in runs:
        writes = [s for s in run["steps"] if s["attrs"].get("budget.side_effect") == "write"]
        recs = [s for s in run["steps"] if s["attrs"].get("budget.step.kind") == "reconcile"]
        results.update(s["attrs"].get("budget.reconcile.result") for s in recs)
        linked += sum(bool(s.get("links")) for s in recs)
        keys = {s["attrs"].get("budget.idempotency_key") for s in recs}
        targets = {link["spanId"] for s in recs for link in s.get("links", [])}
        for write in writes:
            assert write["attrs"]["budget.idempotency_key"]
            uncertain = write["attrs"]["budget.effect_status"] == "possible"
            reconciled = write["attrs"]["budget.idempotency_key"] in keys or (
                write["spanId"] in targets)
            orphans += uncertain and not reconciled
    assert {"landed", "not_landed", "unknown"} <= set(results)
    assert linked > 0 and orphans >= 5


def test_week_47_tightened_caps(runs: list[dict]) -> None:
    per_week: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        per_week[run["week"]].append(run)

    def per_run(week: str, predicate) -> float:
        return sum(predicate(s["attrs"]) for r in per_week[week] for s in r["steps"]) / len(
            per_week[week])

    def timeout(a: dict) -> bool:
        return a.get("budget.outcome") == "client_timeout"

    def reconcile(a: dict) -> bool:
        return a.get("budget.step.kind") == "reconcile"

    def uncertain(a: dict) -> bool:
        return a.get("budget.effect_status") == "possible"

    others = [w for w in per_week if w != "2026-W47"]
    for predicate in (timeout, reconcile, uncertain):
        assert per_run("2026-W47", predicate) > max(per_run(w, predicate) for w in others)


def test_some_traces_carry_plain_opentelemetry_only(runs: list[dict]) -> None:
    plain = [r for r in runs if not any(k.startswith("budget.") and k != "budget.total_ms"
                                        for s in r["spans"] for k in s["attrs"])]
    assert 100 <= len(plain) <= 0.25 * len(runs)
    assert any("budget.total_ms" in r["root"]["attrs"] for r in plain)
    steps = [s for r in plain for s in r["steps"]]
    assert all("gen_ai.operation.name" in s["attrs"] for s in steps)
    assert any(e["attributes"] and _attrs(e["attributes"]).get("exception.type")
               for s in steps for e in s.get("events", []))
    assert any(s["attrs"].get("http.response.status_code", 0) >= 500 for s in steps)


# ---- other formats and the API ----------------------------------------------------------------


def _spans_in(request: trace_service_pb2.ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def test_protobuf_formats_hold_the_same_spans(tmp_path: Path) -> None:
    paths = {fmt: tmp_path / f"t.{fmt}" for fmt in ("jsonl", "pb-stream", "pb")}
    for fmt, path in paths.items():
        generate.main(["--out", str(path), "--runs", "25", "--format", fmt])
    json_spans = sum(len(ss["spans"]) for request in generate.read_jsonl(paths["jsonl"])
                     for rs in request["resourceSpans"] for ss in rs["scopeSpans"])

    data, offset, stream_spans = paths["pb-stream"].read_bytes(), 0, 0
    while offset < len(data):
        size = int.from_bytes(data[offset:offset + 4], "big")
        message = trace_service_pb2.ExportTraceServiceRequest.FromString(
            data[offset + 4:offset + 4 + size])
        stream_spans += _spans_in(message)
        offset += 4 + size
    single = trace_service_pb2.ExportTraceServiceRequest.FromString(paths["pb"].read_bytes())
    assert json_spans == stream_spans == _spans_in(single) > 300


def test_gzip_is_chosen_by_suffix_or_flag(tmp_path: Path) -> None:
    generate.main(["--out", str(tmp_path / "a.pb.gz"), "--runs", "5", "--format", "pb"])
    generate.main(["--out", str(tmp_path / "b.pb"), "--runs", "5", "--format", "pb", "--gzip"])
    first = gzip.decompress((tmp_path / "a.pb.gz").read_bytes())
    assert first == gzip.decompress((tmp_path / "b.pb").read_bytes())


def _hex_ids_to_base64(request: dict) -> dict:
    """OTLP JSON uses hex ids, protobuf's JSON mapping base64: convert for ParseDict."""
    def b64(hex_id: str) -> str:
        return base64.b64encode(bytes.fromhex(hex_id)).decode()

    for rs in request["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = b64(span[key])
                for link in span.get("links", []):
                    link["traceId"], link["spanId"] = b64(link["traceId"]), b64(link["spanId"])
    return request


def test_encoders_agree_with_the_protobuf_classes() -> None:
    checked = 0
    for batch in generate.iter_batches(runs=20):
        reference = batch_to_proto(batch)
        assert batch_to_pb_bytes(batch) == reference.SerializeToString(deterministic=True)
        parsed = json_format.ParseDict(_hex_ids_to_base64(json.loads(batch_to_json(batch))),
                                       trace_service_pb2.ExportTraceServiceRequest())
        assert parsed == reference
        checked += 1
    assert checked > 15


def test_iter_requests_yields_protobuf_requests() -> None:
    requests = list(generate.iter_requests(seed=3, runs=10))
    assert requests and all(isinstance(r, trace_service_pb2.ExportTraceServiceRequest)
                            for r in requests)
    assert len(requests[0].resource_spans[0].scope_spans[0].spans[0].trace_id) == 16


def test_latency_draws_do_not_depend_on_the_policy() -> None:
    """Same seed under two policies: a call that ran to its natural end in both took as long."""
    def ok_durations(policy) -> dict[tuple[bytes, bytes], int]:
        out = {}
        for run in generate.iter_runs(seed=11, runs=60, policy=policy):
            # A step wrapping retried attempts lasts as long as its attempts: skip it.
            wrappers = {s.parent_id for s in run.spans if "budget.step.kind" in s.attrs}
            for span in run.spans:
                if (span.attrs.get("budget.outcome") == "ok" and span.span_id not in wrappers
                        and span.attrs.get("budget.step.kind") in ("model", "tool")):
                    out[run.trace_id, span.span_id] = span.end_ns - span.start_ns
        return out

    base, tight = ok_durations(BASELINE), ok_durations(TIGHTENED)
    common = set(base) & set(tight)
    assert len(common) > 400
    assert all(base[key] == tight[key] for key in common)
    assert len(set(base) ^ set(tight)) > 0, "the policies do change what happens"


# ---- usage and money (docs/metrics.md §11) ----------------------------------------------------


def _usage(span: dict) -> tuple[int, int, int, int] | None:
    a = span["attrs"]
    if "gen_ai.usage.input_tokens" not in a:
        return None
    return (a["gen_ai.usage.input_tokens"], a.get("gen_ai.usage.cache_read.input_tokens", 0),
            a["gen_ai.usage.output_tokens"], a.get("gen_ai.usage.reasoning.output_tokens", 0))


def _top_step(span: dict, root: dict, by_id: dict[str, dict]) -> str:
    """The top-level step (a child of the root) that a span is or lies under."""
    while span["parentSpanId"] != root["spanId"]:
        span = by_id[span["parentSpanId"]]
    return span["spanId"]


def test_every_answered_model_call_reports_its_usage(runs: list[dict]) -> None:
    """Answered model calls carry usage (input with its cache read, output with its reasoning),
    calls that failed or were abandoned carry none; later turns read from the cache."""
    cached = reasoned = 0
    for run in runs:
        for step in run["steps"]:
            a = step["attrs"]
            if a.get("gen_ai.operation.name") != "chat":
                continue
            usage = _usage(step)
            answered = a.get("budget.outcome", "ok") == "ok" and step["status"].get(
                "code", 0) != 2
            assert (usage is not None) == answered, step
            if usage is None:
                continue
            input_tokens, cache_read, output, reasoning = usage
            assert 0 <= cache_read <= input_tokens and cache_read % 128 == 0
            assert 0 <= reasoning < output
            cached += cache_read > 0
            reasoned += reasoning > 0
            if reasoning:
                assert a["gen_ai.response.model"].startswith("o4-mini")
    assert cached > 5_000 and reasoned > 100


def test_budgets_in_dollars_and_tokens_and_the_runs_that_overspend(runs: list[dict]) -> None:
    """Priced with genai-prices (the bundled table) at each call's start, as docs/metrics.md
    §11.3 says, without budgetscope: a share of runs state a dollar budget, some a token budget;
    a few overspend, most of those because of an early huge call (the cost culprit) that a later
    small call pushed over the line (the crosser), and one model has no price at all."""
    from decimal import ROUND_HALF_EVEN, Decimal

    from genai_prices import Usage, calc_price

    def cost_nano(span: dict) -> int | None:
        input_tokens, cache_read, output, _ = _usage(span)  # type: ignore[misc]
        when = dt.datetime.fromtimestamp(int(span["startTimeUnixNano"]) / 1e9, dt.UTC)
        try:
            price = calc_price(Usage(input_tokens=input_tokens, cache_read_tokens=cache_read,
                                     output_tokens=output), span["attrs"]["gen_ai.response.model"],
                               provider_id=span["attrs"]["gen_ai.provider.name"],
                               genai_request_timestamp=when).total_price
        except LookupError:
            return None
        return int((Decimal(price) * 10**9).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))

    unpriced: Counter = Counter()
    budgeted = token_budgeted = over = culprit_is_crosser = 0
    for run in runs:
        root = run["root"]
        by_id = {span["spanId"]: span for span in run["spans"]}

        metered = []
        for span in run["spans"]:
            if _usage(span) is None:
                continue
            cost = cost_nano(span)
            if cost is None:
                unpriced[span["attrs"]["gen_ai.response.model"]] += 1
            metered.append((int(span["endTimeUnixNano"]), int(span["startTimeUnixNano"]),
                            span["spanId"], cost or 0, _top_step(span, root, by_id)))
        token_budgeted += "budget.total_tokens" in root["attrs"]
        if "budget.total_usd" not in root["attrs"]:
            continue
        budgeted += 1
        budget = int(Decimal(repr(root["attrs"]["budget.total_usd"])) * 10**9)
        if sum(m[3] for m in metered) < budget:
            continue
        over += 1
        consumption: Counter = Counter()
        for m in metered:
            consumption[m[4]] += m[3]
        starts = {step: int(by_id[step]["startTimeUnixNano"]) for step in consumption}
        culprit = max(consumption, key=lambda step: (consumption[step], -starts[step]))
        spent = 0
        for m in sorted(metered):
            spent += m[3]
            if spent >= budget:
                culprit_is_crosser += m[4] == culprit
                break
    assert set(unpriced) == {"triage-distill-v2"} and unpriced["triage-distill-v2"] > 100
    assert 0.3 * len(runs) <= budgeted <= 0.7 * len(runs)
    assert 0.2 * len(runs) <= token_budgeted < budgeted
    assert 10 <= over <= 0.05 * budgeted
    assert 1 <= culprit_is_crosser < over - 10, "mostly an early spender, a later crosser"
