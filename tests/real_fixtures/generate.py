"""Regenerate the real-library fixtures: for each library, a venv pinned by
envs/<library>/requirements.txt (created with uv from the package registry), a scenario run in
it against fresh fakes on 127.0.0.1, and two files: otlp/<library>.otlp.pb (every OTLP request
the real exporter sent, as a length-prefixed protobuf stream) and truth/<library>.json (what the
harness did and saw).

    .venv/bin/python -m tests.real_fixtures.generate [--only httpx,grpc] [--otlp DIR] [--truth DIR]

Nothing but package installs leaves the machine: the scenarios get a proxy that leads nowhere
(127.0.0.1:9) for anything not on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.real_fixtures import fake_usage
from tests.real_fixtures.fakes import FakeWorld
from tests.real_fixtures.scenarios.harness import summarise_raw

HERE = Path(__file__).resolve().parent
ENVS = HERE / "envs"
SCENARIOS = HERE / "scenarios"
OTLP = HERE / "otlp"
TRUTH = HERE / "truth"
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "budgetscope-real-fixtures"
# Below this the culprit or holder would hang on how the harness's clock and the spans' differ.
MIN_MARGIN_MS = 20.0


@dataclass(frozen=True)
class Library:
    name: str  # fixture name: otlp/<name>.otlp.pb, truth/<name>.json
    env: str  # envs/<env>/requirements.txt (or package.json for node)
    command: tuple[str, ...]  # run with the env's interpreter, from SCENARIOS
    extra_env: dict[str, str] = field(default_factory=dict)
    node: bool = False


LIBRARIES = [
    Library("httpx", "httpx", ("plain_http.py", "httpx")),
    Library("requests_stable", "requests", ("plain_http.py", "requests"),
            {"OTEL_SEMCONV_STABILITY_OPT_IN": "http"}),
    Library("grpc", "grpc", ("grpc_agent.py",)),
    Library("openai_v2", "openai_v2", ("openai_v2.py",),
            {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"}),
    Library("openai_agents", "openai_agents", ("openai_agents.py",)),
    Library("pydantic_ai", "pydantic_ai", ("pydantic_ai_agent.py",)),
    Library("langgraph", "langgraph", ("langgraph_agent.py",)),
    Library("openllmetry", "openllmetry", ("openllmetry.py",),
            {"TRACELOOP_TELEMETRY": "false", "TRACELOOP_TRACE_CONTENT": "false",
             "TRACELOOP_METRICS_ENABLED": "false"}),
    Library("vercel_ai", "vercel_ai", ("vercel_ai.mjs",), node=True),
    Library("strands", "strands", ("strands_agent.py",)),
    # the SDK traces itself (ANTHROPIC_OPEN_TELEMETRY unset: on by default from 2.17)
    Library("anthropic", "anthropic", ("anthropic_agent.py", "alone")),
    Library("anthropic_openllmetry", "anthropic_openllmetry",
            ("anthropic_agent.py", "openllmetry"),
            {"TRACELOOP_TELEMETRY": "false", "TRACELOOP_TRACE_CONTENT": "false"}),
    Library("anthropic_openinference", "anthropic_openinference",
            ("anthropic_agent.py", "openinference")),
    Library("smolagents", "smolagents", ("smolagents_agent.py",),
            {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}),
    # LITELLM_LOCAL_MODEL_COST_MAP: LiteLLM would fetch its model-cost map at import
    Library("adk", "adk", ("adk_agent.py",),
            {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}),
    Library("llama_index", "llama_index", ("llama_index_agent.py",)),
    # spans never made current: each HTTP call a trace of its own (docs/conventions.md)
    Library("stray_httpx", "httpx", ("stray_calls.py", "httpx")),
    Library("stray_requests", "requests", ("stray_calls.py", "requests"),
            {"OTEL_SEMCONV_STABILITY_OPT_IN": "http"}),
    Library("stray_undici", "stray_undici", ("stray_undici.mjs",), node=True),
    Library("span_shapes", "httpx", ("span_shapes.py",)),
]
BY_NAME = {library.name: library for library in LIBRARIES}


def find_uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(found).exists():
        raise SystemExit("uv not found: `make install` puts it in .venv/bin")
    return found


def _quiet_run(command: list[str], **kwargs: object) -> None:
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)  # type: ignore
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


def python_env(library: Library, workdir: Path) -> Path:
    """The library's venv, created once per requirements file content; returns its python."""
    requirements = ENVS / library.env / "requirements.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    venv = workdir / f"{library.env}-{digest}"
    python = venv / "bin" / "python"
    if (venv / ".ready").exists():
        return python
    uv = find_uv()
    # never let uv fetch an interpreter: the machine's 3.11 is the one the project runs on
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never")
    _quiet_run([uv, "venv", "-q", "--python", sys.executable, str(venv)], env=env)
    _quiet_run([uv, "pip", "install", "-q", "--python", str(python), "--no-deps",
                "-r", str(requirements)], env=env)
    (venv / ".ready").touch()
    return python


def node_env(library: Library, workdir: Path) -> Path:
    """A folder with the pinned npm packages installed by `npm ci`; returns the node binary."""
    source = ENVS / library.env
    digest = hashlib.sha256((source / "package-lock.json").read_bytes()).hexdigest()[:12]
    folder = workdir / f"{library.env}-{digest}"
    if not (folder / ".ready").exists():
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(source / name, folder / name)
        _quiet_run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=folder)
        (folder / ".ready").touch()
    return folder


def scenario_environment(world: FakeWorld, truth_path: Path, library: Library) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "OPENAI_", "ANTHROPIC_", "TRACELOOP_", "VIRTUAL_ENV",
                                  "PYTHON"))}
    env.update(world.environment())
    env.update(library.extra_env)
    env.update({
        "TRUTH_PATH": str(truth_path),
        "PYTHONPATH": str(SCENARIOS),
        "OPENAI_API_KEY": "sk-fake-key-for-127.0.0.1",
        "OPENAI_BASE_URL": world.model.url,
        # the Anthropic SDK appends /v1/messages itself
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-127.0.0.1",
        "ANTHROPIC_BASE_URL": world.model.url.removesuffix("/v1"),
        # anything not addressed to 127.0.0.1 goes to a port where nothing listens
        "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    })
    return env


def generate(library: Library, otlp: Path, truth_dir: Path, workdir: Path) -> dict:
    """Run one scenario; returns its ground truth (also written to truth_dir/<name>.json)."""
    for folder in (workdir, otlp, truth_dir):
        folder.mkdir(parents=True, exist_ok=True)
    if library.node:
        folder = node_env(library, workdir)
        # ES modules resolve packages from the script's own folder (NODE_PATH is ignored)
        script = shutil.copy(SCENARIOS / library.command[0], folder / library.command[0])
        command = ["node", str(script), *library.command[1:]]
        env_extra = {}
        cwd = folder
    else:
        python = python_env(library, workdir)
        command = [str(python), str(SCENARIOS / library.command[0]), *library.command[1:]]
        env_extra = {}
        cwd = SCENARIOS
    truth_path = truth_dir / f"{library.name}.json"
    world = FakeWorld()
    try:
        env = scenario_environment(world, truth_path, library) | env_extra
        done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"scenario {library.name} failed:\n{done.stdout}\n{done.stderr}")
        requests = world.capture.write(otlp / f"{library.name}.otlp.pb")
        truth = json.loads(truth_path.read_text())
        if "raw_runs" in truth:
            truth = summarise_raw(truth)
        world.model.settle()
        attach_billed_usage(truth, world.model.billed)
        # the fakes are part of the harness: what they served is ground truth too
        truth["fake_servers"] = {"tool_writes_received": len(world.tools.writes),
                                 "model_requests": [served_as(served["action"])
                                                    for served in world.model.served],
                                 "model_calls_billed": len(world.model.billed),
                                 "otlp_trace_requests": requests,
                                 "other_signals": world.capture.other_signals}
        truth_path.write_text(json.dumps(truth, indent=1) + "\n")
        return truth
    finally:
        world.close()


def served_as(action: dict) -> str:
    """The scripted action a request got, as the truth lists it: `slow then status` for a slow
    answer that ends in an error (fakes.py), so that what was answered with a 2xx is told."""
    if action.get("do") == "slow" and "then" in action:
        return f"slow then {action['then'].get('do')}"
    return action.get("do")


def attach_billed_usage(truth: dict, billed: list[dict]) -> None:
    """Give each run the fake model's billing log of the requests it made (the harness noted
    which, `model_requests`) and their sums in docs/metrics.md §11.1's terms: `returned`, what
    the client was told (what any span could carry), and `billed`, everything charged (a
    stream without include_usage, or an answer to a client that hung up, too)."""
    by_number = {entry["request"]: entry for entry in billed}
    claimed: set[int] = set()
    for run in truth["runs"]:
        first, end = run.get("model_requests", (0, 0))
        calls = [by_number[number] for number in range(first + 1, end + 1)
                 if number in by_number]
        claimed.update(call["request"] for call in calls)
        returned, charged = dict(fake_usage.ZERO_TERMS), dict(fake_usage.ZERO_TERMS)
        returned_nano = 0
        for call in calls:
            call["usd_nano"] = price_nano(call)
            charged = fake_usage.add_terms(charged, call["terms"])
            if call["returned"]:
                returned = fake_usage.add_terms(returned, call["terms"])
                returned_nano += call["usd_nano"]
        run["usage"] = {"returned": returned, "billed": charged,
                        "returned_usd_nano": returned_nano,
                        "unreturned_calls": sum(not call["returned"] for call in calls),
                        "calls": [{key: value for key, value in call.items()
                                   if key != "billed_ns"} for call in calls]}
    orphans = sorted(set(by_number) - claimed)
    if orphans:
        raise SystemExit(f"the fake billed requests {orphans} that no run of the harness made")


def price_nano(call: dict) -> int:
    """What a billed call cost at genai-prices' rates for its model when the fake billed it, in
    nano-dollars rounded half to even (docs/metrics.md §11.3), from the fake's own figures."""
    import datetime as dt
    from decimal import ROUND_HALF_EVEN, Decimal

    from genai_prices import Usage, calc_price

    terms = call["terms"]
    usage = Usage(input_tokens=terms["input"], cache_read_tokens=terms["cache_read"],
                  cache_write_tokens=terms["cache_write"], output_tokens=terms["output"])
    when = dt.datetime.fromtimestamp(call["billed_ns"] / 1e9, dt.UTC)
    price = calc_price(usage, call["model"], provider_id=call["api"],
                       genai_request_timestamp=when).total_price
    return int((Decimal(price) * 10**9).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated fixture names: "
                        + ",".join(BY_NAME))
    parser.add_argument("--otlp", type=Path, default=OTLP, help="where the OTLP files go")
    parser.add_argument("--truth", type=Path, default=TRUTH, help="where the ground truth goes")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR,
                        help="where the pinned venvs are kept between runs")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(BY_NAME)
    for name in names:
        truth = generate(BY_NAME[name], args.otlp, args.truth, args.workdir)
        margins = [run[key] for run in truth["runs"]
                   for key in ("deadline_margin_ms", "culprit_margin_ms")
                   if run[key] is not None]
        smallest = min(margins, default=float("nan"))
        print(f"{name}: {len(truth['runs'])} runs, "
              f"{sum(len(run['steps']) for run in truth['runs'])} steps, "
              f"{truth['fake_servers']['otlp_trace_requests']} OTLP requests, "
              f"smallest deadline/culprit margin {smallest:.1f} ms")
        if smallest < MIN_MARGIN_MS:
            raise SystemExit(f"{name}: a margin under {MIN_MARGIN_MS} ms makes the culprit or "
                             "holder a matter of microseconds; run it again on a quieter machine")


if __name__ == "__main__":
    main()
