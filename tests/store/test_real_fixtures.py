"""Traces produced by real instrumentation libraries (tests/real_fixtures: each library in its
own pinned venv, driven against fakes on 127.0.0.1, exported by the real OTLP exporter) give,
once ingested, the runs, steps (kind, name, class), culprit, holder and declared writes that the
harness which made them logged (docs/conventions.md, docs/metrics.md §3, §4). Regenerate them with
`python -m tests.real_fixtures.generate`.

CONVENTION_GAPS lists where docs/conventions.md and docs/metrics.md, as written, give another answer
than the harness's ground truth, each with the spans that cause it; the test requires exactly those
differences, so a rule that changes either way (a gap closed, or a new one) fails it until this
table is brought up to date.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from budgetscope.cli import cli
from tests.support.paths import REPO
from tests.support.real_fixture_compare import (
    FIXTURES,
    differences_by_place,
    expected_runs,
    expected_usage,
    found_runs,
    found_usage,
    has_usage,
    ingest,
    ingested,
    load_truth,
)

NAMES = sorted(path.stem for path in (FIXTURES / "truth").glob("*.json"))
USAGE_NAMES = [name for name in NAMES if has_usage(load_truth(FIXTURES / "truth" / f"{name}.json"))]

# (fixture, run number in start order, field) → why docs/conventions.md and docs/metrics.md §3,
# as written, differ from the ground truth there, with the spans that cause it. Empty:
# smolagents' failed model calls, whose LLM span 'OpenAIModel.generate' names no model
# (llm.model_name is set only from a response), take the one model name its service's named
# spans of that span name carry (docs/conventions.md, "A model step without a model name").
CONVENTION_GAPS: dict[tuple[str, int, str], str] = {}


def test_every_library_has_a_fixture() -> None:
    from tests.real_fixtures.generate import BY_NAME

    assert sorted(BY_NAME) == NAMES
    for name in NAMES:
        assert (FIXTURES / "otlp" / f"{name}.otlp.pb").stat().st_size > 0


@pytest.mark.parametrize("name", NAMES)
def test_real_fixture_matches_ground_truth(name: str,
                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    truth = load_truth(FIXTURES / "truth" / f"{name}.json")
    db = ingested(name, tmp_path_factory)  # `budgetscope ingest` of the fixture alone
    found = differences_by_place(found_runs(db), expected_runs(truth))
    known = {(run, field) for fixture, run, field in CONVENTION_GAPS if fixture == name}
    unexpected = [text for where, text in sorted(found.items()) if where not in known]
    closed = sorted(known - set(found))
    assert not unexpected, "\n".join(unexpected)
    assert not closed, f"now as the harness says, remove from CONVENTION_GAPS: {closed}"


# (fixture, run number in start order, field) → why what docs/metrics.md §11 reads from the
# library's spans differs from what the fake model server billed and told the client, with the
# spans that cause it. Each is the library's doing (it drops or reshapes a figure the fake
# returned); the test requires exactly these, so a library upgrade that fixes one, or a
# derivation that reads one differently, fails it until this table is brought up to date.
_RAW_HTTP = (
    "the agent's raw model call (POST /chat/completions with {lib}) is recorded by the HTTP "
    "instrumentation only: a CLIENT span with http.* attributes and no usage (no HTTP "
    "instrumentation reads a response body), so the tokens the fake returned in the body are "
    "on no span; the span is a step of kind other, not a model step, so it is not counted as "
    "unmetered either")
_OPENAI_V2_CACHE = (
    "opentelemetry-instrumentation-openai-v2 2.4b0 (util-genai 1.1b0) sets "
    "gen_ai.usage.input_tokens (= prompt_tokens, cache included) and gen_ai.usage.output_tokens "
    "only: the fake's prompt_tokens_details.cached_tokens ({cached}) is on no span, so §11.1 "
    "reads cache read 0 and §11.3 prices those tokens at the full input rate")
_OPENINFERENCE_AGENTS = (
    "OpenInference's openai-agents instrumentor puts llm.token_count.prompt / .completion on "
    "the 'generation' LLM spans but no llm.token_count.prompt_details.cache_read nor "
    ".completion_details.reasoning: the fake's cached_tokens ({cached}) and reasoning_tokens "
    "({reasoning}) are on no span; the cache is priced at the full input rate")
_SMOLAGENTS = (
    "OpenInference's smolagents instrumentor sets llm.token_count.prompt / .completion / .total "
    "on 'OpenAIModel.generate' (and the framework's totals on the AGENT span, an aggregate "
    "rightly not added) but no cache_read or reasoning detail: the fake's cached_tokens "
    "({cached}) and reasoning_tokens ({reasoning}) are on no span")
_PYDANTIC_REASONING = (
    "pydantic-ai puts the reasoning count under gen_ai.usage.details.reasoning_tokens, a "
    "spelling outside §11.1's table (gen_ai.usage.reasoning.output_tokens …), so reasoning reads "
    "0 (output, which includes it, is right; the cost is pydantic-ai's own operation.cost, equal "
    "to genai-prices on the fake's figures)")
_STRANDS_REASONING = (
    "strands-agents records gen_ai.usage.input/output/prompt/completion/total_tokens and the "
    "cache reads, but nothing of completion_tokens_details.reasoning_tokens ({reasoning}): "
    "reasoning reads 0 (output includes it, so tokens and cost are right)")
_ADK_OUTPUT = (
    "google-adk with LiteLLM sets gen_ai.usage.output_tokens = completion_tokens + "
    "reasoning_tokens ({completion} + {reasoning} = {sum} on 'generate_content "
    "openai/gpt-4o-mini') and gen_ai.usage.reasoning.output_tokens = {reasoning}: it maps "
    "OpenAI's completion_tokens (which already includes the reasoning) to Gemini's "
    "candidates_token_count (which does not) and adds the thoughts, so the reasoning is counted "
    "twice in output; §11.1 takes O ≥ Z as inclusive and reads {sum}")
_ANTHROPIC_FAILED_STREAM = (
    "the Anthropic SDK's own span of the stream that overloaded after message_start "
    "(anthropic.messages.create, error.type overloaded_error) records the input, cache read "
    "and cache write of message_start but not its output_tokens (1): the SDK sets "
    "gen_ai.usage.output_tokens from message_delta only, which never came")
_OPENINFERENCE_FAILED_STREAM = (
    _ANTHROPIC_FAILED_STREAM + ". OpenInference's 'messages.stream' LLM span around the "
    "same call (a sibling from another scope, ERROR, its interval around the SDK's) has "
    "llm.token_count.completion = 1, but it is the wrapper of §9's one call, two spans, never "
    "metered when the call it wraps carries usage (docs/metrics.md §11.2): the SDK's span "
    "(anthropic.request.id req_0016: input 1564, cache read 1536, cache write 0, no output) "
    "is the metered one")
_OPENLLMETRY_FAILED_STREAM = (
    _ANTHROPIC_FAILED_STREAM + " (anthropic.request.id req_0015: input 1948, cache read 1536, "
    "cache write 384, no output). OpenLLMetry's anthropic instrumentation sent no span for that "
    "stream at all; its 'anthropic.chat' of the stream before (req_0014) says "
    "gen_ai.usage.output_tokens 58, message_start's 1 added to message_delta's cumulative 57, "
    "but it is the wrapper of one call, two spans beside the SDK's span (57), never metered "
    "(docs/metrics.md §11.2)")
USAGE_GAPS: dict[tuple[str, int, str], str] = {
    **{("httpx", 1, field): _RAW_HTTP.format(lib="httpx") for field in (
        "tokens", "input_tokens", "output_tokens", "metered_spans", "cost_nano")},
    **{("requests_stable", 1, field): _RAW_HTTP.format(lib="requests") for field in (
        "tokens", "input_tokens", "output_tokens", "metered_spans", "cost_nano")},
    **{("openai_v2", run, field): _OPENAI_V2_CACHE.format(cached=cached)
       for run, cached in ((1, 1536), (2, 768), (3, 768))
       for field in ("cache_read_tokens", "cost_nano")},
    **{("openai_agents", run, field): _OPENINFERENCE_AGENTS.format(cached=cached,
                                                                    reasoning=reasoning)
       for run, cached, reasoning in ((1, 1920, 65), (3, 1792, 34))
       for field in ("cache_read_tokens", "reasoning_tokens", "cost_nano")},
    **{("smolagents", 0, field): _SMOLAGENTS.format(cached=1664, reasoning=0)
       for field in ("cache_read_tokens", "cost_nano")},
    **{("smolagents", 3, field): _SMOLAGENTS.format(cached=1664, reasoning=34)
       for field in ("cache_read_tokens", "reasoning_tokens", "cost_nano")},
    ("pydantic_ai", 1, "reasoning_tokens"): _PYDANTIC_REASONING,
    ("strands", 1, "reasoning_tokens"): _STRANDS_REASONING.format(reasoning=65),
    ("strands", 2, "reasoning_tokens"): _STRANDS_REASONING.format(reasoning=34),
    **{("adk", run, field): _ADK_OUTPUT.format(completion=completion, reasoning=reasoning,
                                               sum=completion + reasoning)
       for run, completion, reasoning in ((1, 90, 65), (2, 86, 34))
       for field in ("tokens", "output_tokens", "cost_nano")},
    **{("anthropic", 5, field): _ANTHROPIC_FAILED_STREAM
       for field in ("tokens", "output_tokens", "cost_nano")},
    **{("anthropic_openinference", 5, field): _OPENINFERENCE_FAILED_STREAM
       for field in ("tokens", "output_tokens", "cost_nano")},
    **{("anthropic_openllmetry", 4, field): _OPENLLMETRY_FAILED_STREAM
       for field in ("tokens", "output_tokens", "cost_nano")},
}


@pytest.mark.parametrize("name", USAGE_NAMES)
def test_real_fixture_usage_matches_the_fake_billing_log(
        name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Per run and per quantity, the tokens the store derives (runs.tokens, input_tokens …,
    metered_spans) are those the fake model server billed and returned, in docs/metrics.md
    §11.1's terms, from its own log: nothing counted twice (an aggregate, the second span of
    one call), nothing lost. A call billed without the client being told (a stream without
    include_usage, a client that hung up) is a possibly billed unmetered step; the cost is the
    billed usage at genai-prices' rates (or the library's own reported cost, which agrees)."""
    truth = load_truth(FIXTURES / "truth" / f"{name}.json")
    db = ingested(name, tmp_path_factory)  # `budgetscope ingest` of the fixture alone
    found = differences_by_place(found_usage(db), expected_usage(truth))
    known = {(run, field) for fixture, run, field in USAGE_GAPS if fixture == name}
    unexpected = [text for where, text in sorted(found.items()) if where not in known]
    closed = sorted(known - set(found))
    assert not unexpected, "\n".join(unexpected)
    assert not closed, f"now as the fake billed, remove from USAGE_GAPS: {closed}"


def test_the_fake_model_bills_every_answer_of_every_fixture() -> None:
    """Every 2xx the fake model served is in its billing log, inside one of the harness's runs,
    and every fixture whose scenario calls a model has usage to compare."""
    for name in NAMES:
        truth = load_truth(FIXTURES / "truth" / f"{name}.json")
        served = truth["fake_servers"]["model_requests"]
        billed = [call for run in truth["runs"] for call in run["usage"]["calls"]]
        # an action ending in `status` (plain, or `slow then status`) answered an error
        answered = sum(1 for action in served if action.split(" then ")[-1] != "status")
        assert truth["fake_servers"]["model_calls_billed"] == len(billed) == answered, name
        assert (name in USAGE_NAMES) == bool(answered), name


@pytest.mark.parametrize("name", NAMES)
def test_runs_whose_root_never_arrived_have_no_root_in_the_capture(name: str) -> None:
    """What the truth calls root_missing is what the exporter sent: as many traces without a
    parentless span as runs the harness knows lost their root (smolagents' never-ended AGENT
    span), and none in a fixture whose truth says nothing of it."""
    from tests.real_fixtures.show import spans

    truth = load_truth(FIXTURES / "truth" / f"{name}.json")
    rooted: dict[str, bool] = {}
    for span in spans(FIXTURES / "otlp" / f"{name}.otlp.pb"):
        rooted[span["traceId"]] = rooted.get(span["traceId"], False) or not span.get(
            "parentSpanId")
    missing = sum(1 for run in truth["runs"] if run.get("root_missing"))
    assert sum(1 for has_root in rooted.values() if not has_root) == missing


@pytest.mark.slow
def test_clickhouse_derivation_agrees_on_real_fixtures(tmp_path: Path) -> None:
    """The ClickHouse derivation (chdb, in a process of its own: one data folder per process)
    gives the same runs and failures reports as DuckDB's on every real fixture."""
    files = [str(FIXTURES / "otlp" / f"{name}.otlp.pb") for name in NAMES]
    db = tmp_path / "all.duckdb"
    for path in files:
        ingest(Path(path), db)
    with duckdb.connect(str(db), read_only=True) as connection:
        spans = connection.execute("SELECT count(*) FROM spans").fetchone()[0]
    duck = {}
    for report in REPORTS:
        result = CliRunner().invoke(cli, ["--db", str(db), "report", report])
        assert result.exit_code == 0, result.output
        duck[report] = result.stdout
    # from the checkout (tests run in an empty folder of their own): the side imports bench/
    done = subprocess.run([sys.executable, "-c", CLICKHOUSE_SIDE, f"chdb://{tmp_path / 'ch'}",
                           *files], check=True, capture_output=True, text=True,
                          cwd=REPO)
    clickhouse = json.loads(done.stdout)
    assert clickhouse["spans"] == spans
    for report in REPORTS:
        assert clickhouse[report] == duck[report], report


REPORTS = ("runs", "failures")
CLICKHOUSE_SIDE = """
import json, sys
from click.testing import CliRunner
from budgetscope.cli import cli
from store import clickhouse
from bench.support.clickhouse_load.traces import load_files
out = {"spans": load_files(clickhouse.connect(sys.argv[1]), sys.argv[2:])}
for report in ("runs", "failures"):
    result = CliRunner().invoke(cli, ["--backend", sys.argv[1], "report", report])
    assert result.exit_code == 0, result.output
    out[report] = result.stdout
print(json.dumps(out))
"""
