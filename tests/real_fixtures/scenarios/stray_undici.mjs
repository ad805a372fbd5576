// The Node side of stray_calls.py: an agent whose tracer starts its run, tool and model spans
// with their parent given by hand and never makes them active, calling over Node's fetch,
// instrumented by the real @opentelemetry/instrumentation-undici. With no span active, each
// HTTP call is the root of a one-span trace of its own (docs/conventions.md, "HTTP client spans in
// a trace of their own"). Writes the harness's raw ground truth; the generator computes culprit and
// holder from it (tests/real_fixtures/scenarios/harness.py). The harness's own control calls
// go through node:http, which the undici instrumentation does not see.
import { request as httpRequest } from "node:http";
import { readFileSync, writeFileSync } from "node:fs";

import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { registerInstrumentations } from "@opentelemetry/instrumentation";
import { UndiciInstrumentation } from "@opentelemetry/instrumentation-undici";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

const MODEL_URL = process.env.FAKE_MODEL_URL;
const TOOL_URL = process.env.FAKE_TOOL_URL;
const CLIENT_TIMEOUT_MS = 300;
const GENEROUS_TIMEOUT_MS = 5000;
const MODEL = "gpt-4o-mini";
const SERVICE = "stray-undici-agent";
const HOST = "127.0.0.1";
const MARGIN_MS = 20;

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": SERVICE }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
provider.register();
registerInstrumentations({ instrumentations: [new UndiciInstrumentation()] });
const tracer = trace.getTracer("stray-agent");

const nowNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e3)) * 1000n;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function script(...actions) {
  // node:http, not fetch: the harness's own call is no span
  return new Promise((resolve, reject) => {
    const url = new URL(MODEL_URL.replace(/\/v1$/, "") + "/_script");
    const body = JSON.stringify(actions);
    const req = httpRequest(url, { method: "POST", headers: { "content-length": body.length } },
      (res) => { res.resume(); res.on("end", resolve); });
    req.on("error", reject);
    req.end(body);
  });
}

// How many requests the fake model has taken (node:http, as script): a run's calls are those it
// takes while the run lasts, and the generator gives the run the usage the fake billed for them.
function modelRequestsSoFar() {
  return new Promise((resolve, reject) => {
    const url = new URL(MODEL_URL.replace(/\/v1$/, "") + "/_served");
    httpRequest(url, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => { body += chunk; });
      res.on("end", () => resolve(JSON.parse(body).length));
    }).on("error", reject).end();
  });
}

// The fake's billed usage as OpenTelemetry's GenAI conventions spell it on a model span (input
// with its cache, output with its reasoning), as an OpenAI instrumentation sets it from the
// response.
const genAiUsage = (usage) => ({
  "gen_ai.usage.input_tokens": usage.prompt_tokens,
  "gen_ai.usage.output_tokens": usage.completion_tokens,
  "gen_ai.usage.cache_read.input_tokens": usage.prompt_tokens_details.cached_tokens,
  "gen_ai.usage.reasoning.output_tokens": usage.completion_tokens_details.reasoning_tokens,
});

const calls = []; // every HTTP call: { run, step, cls, call, start_ns, end_ns }
const heldSteps = []; // every model and tool step: { run, step }
const runs = [];

// The call made; the body of a model's 2xx answer ({} for any other).
async function send(run, step, method, url, expect, cls, path) {
  const start = nowNs();
  let status;
  let answer = {};
  try {
    const response = await fetch(url, {
      method,
      headers: method === "POST" ? { "content-type": "application/json" } : {},
      body: method === "POST" ? JSON.stringify({ model: MODEL, messages: [] }) : undefined,
      signal: AbortSignal.timeout(expect === "timeout" ? CLIENT_TIMEOUT_MS : GENEROUS_TIMEOUT_MS),
    });
    const text = await response.text();
    status = response.status;
    if (response.ok && (response.headers.get("content-type") || "").startsWith("application/json")) {
      answer = JSON.parse(text);
    }
  } catch (error) {
    if (error.name !== "TimeoutError") throw error;
    status = "timeout";
  }
  const end = nowNs();
  if (status !== expect) throw new Error(`${path}: ${status}, expected ${expect}`);
  calls.push({ run, step, cls, call: `${method} ${path} → ${status}`, start_ns: start,
               end_ns: end });
  return answer;
}

// A step's span, started with its parent given by hand and never made active.
async function stepSpan(run, parent, kind, name, cls, call, attributes, work, error = false) {
  const step = { kind, name, cls, call, start_ns: nowNs() };
  const span = tracer.startSpan(`${kind === "model" ? "chat" : "execute_tool"} ${name}`,
    { kind: kind === "model" ? SpanKind.CLIENT : SpanKind.INTERNAL, attributes },
    trace.setSpan(ROOT_CONTEXT, parent));
  try {
    await work(step, span);
  } finally {
    if (error) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
    step.end_ns = nowNs();
    run.steps.push(step);
    heldSteps.push({ run, step });
  }
}

// A tool that catches its call's failure and returns its text: its span carries no evidence.
const tool = (run, parent, name, path, expect, cls) => stepSpan(run, parent, "tool", name, cls,
  `GET ${path}`, { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name },
  (step) => send(run, step, "GET", TOOL_URL + path, expect, cls, path));

const model = (run, parent, expect, cls) => stepSpan(run, parent, "model", MODEL, cls,
  `chat → ${expect}`, { "gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL,
                        "gen_ai.system": "openai" },
  async (step, span) => {
    const answer = await send(run, step, "POST", MODEL_URL + "/chat/completions", expect, cls,
                              "/v1/chat/completions");
    // the usage the fake billed, read from its answer
    if (answer.usage) span.setAttributes(genAiUsage(answer.usage));
  },
  expect >= 400);

// A run whose span starts at the harness's run start and is never made active.
async function budgetedRun(note, work) {
  const first = await modelRequestsSoFar();
  const run = { agent: SERVICE, budget_ms: 10000, note, steps: [], start_ns: nowNs() };
  const span = tracer.startSpan("support run", {
    startTime: [Number(run.start_ns / 1000000000n), Number(run.start_ns % 1000000000n)],
    attributes: { "budget.total_ms": 10000 },
  }, ROOT_CONTEXT);
  run.trace_id = span.spanContext().traceId;
  try {
    await work(run, span);
  } finally {
    run.end_ns = nowNs();
    span.end();
    run.model_requests = [first, await modelRequestsSoFar()];
    runs.push(run);
  }
}

// docs/conventions.md on the harness's intervals, as stray_calls.py decides it: a call inside
// exactly one step rolls up into it; inside two or more, or none, it is a run of its own.
function strayRuns() {
  const overlap = (a, b) => a.start_ns < b.end_ns && b.start_ns < a.end_ns;
  for (const made of calls) {
    const holders = heldSteps.filter(({ step }) =>
      step.start_ns <= made.start_ns && made.end_ns <= step.end_ns);
    for (const { run, step } of heldSteps) {
      if (run === made.run || !overlap(run, made.run)) continue;
      for (const edge of [step.start_ns, step.end_ns]) {
        for (const mine of [made.start_ns, made.end_ns]) {
          const gap = Number(edge > mine ? edge - mine : mine - edge) / 1e6;
          if (gap < MARGIN_MS) throw new Error(`${made.call}: ${gap} ms from a step boundary`);
        }
      }
    }
    if (holders.length === 1) {
      if (holders[0].step !== made.step) throw new Error(`${made.call} held by another step`);
      continue;
    }
    runs.push({ agent: SERVICE, budget_ms: null, trace_id: null,
                note: `a stray held by ${holders.length} steps of the service: a run of its own`,
                start_ns: made.start_ns, end_ns: made.end_ns,
                steps: [{ kind: "other", name: HOST, cls: made.cls, call: made.call,
                          start_ns: made.start_ns, end_ns: made.end_ns }] });
  }
}

// Run 1: its calls in sequence, every HTTP call a trace of its own; a progress write between
// two steps lies inside none.
await script({ do: "tool_call", name: "fetch_report" }, { do: "status", code: 503 });
await budgetedRun("every call a trace of its own", async (run, span) => {
  await model(run, span, 200, "ok");
  await tool(run, span, "fetch_report", "/slow", "timeout", "client_timeout");
  await sleep(50);
  await send(run, null, "POST", TOOL_URL + "/write", 201, "ok", "/write");
  await sleep(50);
  await tool(run, span, "lookup_invoice", "/503", 503, "upstream_error");
  await model(run, span, 503, "upstream_error");
});

// Runs 2 and 3 at once: run 3 starts 80 ms after run 2 has (as stray_calls.py, on run 2's own
// start: the harness's calls before a run may take a while), while run 2's tool waits on a slow
// answer; run 3's quick GET lies inside both tools (a run of its own), run 2's inside its own
// tool only.
let slowStarted;
const started = new Promise((resolve) => { slowStarted = resolve; });
await Promise.all([
  budgetedRun("parallel with the next; its call joins its tool", (run, span) => {
    slowStarted();
    return tool(run, span, "fetch_report", "/slow", "timeout", "client_timeout");
  }),
  // (the Node SDK stamps a span's start in whole milliseconds: the call waits 2 ms so that its
  // stray trace, a run of its own, starts after this run's span as the harness's clock says)
  started.then(() => sleep(80)).then(() => budgetedRun("parallel with the last; its call "
    + "lies inside both runs' tools", async (run, span) => {
    await sleep(2);
    await tool(run, span, "lookup_invoice", "/ok", 200, "ok");
  })),
]);

await provider.shutdown();
strayRuns();
runs.sort((a, b) => (a.start_ns < b.start_ns ? -1 : a.start_ns > b.start_ns ? 1 : 0));
const text = (value) => JSON.stringify(value, (key, v) => (typeof v === "bigint" ? String(v) : v));
const packages = {};
for (const name of ["@opentelemetry/instrumentation-undici", "@opentelemetry/sdk-trace-node"]) {
  // the script runs from the folder the pinned packages are installed in
  const manifest = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  packages[name] = JSON.parse(readFileSync(manifest, "utf8")).version;
}
writeFileSync(process.env.TRUTH_PATH, text({
  library: "stray_undici", versions: { ...packages, node: process.version },
  http_semconv: "stable", notes: [],
  raw_runs: runs.map(({ run, ...rest }) => ({
    ...rest, steps: rest.steps.map(({ run: _r, ...step }) => step),
  })),
}));
