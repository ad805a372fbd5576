// A Vercel AI SDK agent (`ai` 6.x generateText with tools and experimental_telemetry) whose
// model is the real OpenAI-compatible provider (@ai-sdk/openai-compatible) pointed at the fake
// model server over HTTP, so the usage on its spans (ai.usage.* and gen_ai.usage.* on the
// inner doGenerate spans, their sum over the steps on the outer ai.generateText) comes from what
// the fake billed; its 503 becomes the provider's APICallError. Spans go out through the OTel
// Node SDK's OTLP http/protobuf exporter to the capture receiver. Writes the harness's raw
// ground truth; the generator computes culprit and holder from it
// (tests/real_fixtures/scenarios/harness.py).
import { readFileSync, writeFileSync } from "node:fs";

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { APICallError, generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";

const MODEL_URL = process.env.FAKE_MODEL_URL;
const TOOL_URL = process.env.FAKE_TOOL_URL;
const CLIENT_TIMEOUT_MS = 300;
const MODEL = "gpt-4o-mini";
const AGENT = "vercel-ai-agent";

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": AGENT }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
provider.register();
const tracer = trace.getTracer("support-app");

const nowNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e3)) * 1000n;
let steps = [];

async function script(...actions) {
  await fetch(MODEL_URL.replace(/\/v1$/, "") + "/_script", {
    method: "POST", body: JSON.stringify(actions),
  });
}

// How many requests the fake model has taken (a run's calls are those it takes meanwhile).
async function modelRequestsSoFar() {
  const response = await fetch(MODEL_URL.replace(/\/v1$/, "") + "/_served");
  return (await response.json()).length;
}

// The provider's own HTTP calls, timed by the harness: the fetch it is given reads the whole
// answer (a stream too) before handing it over, so the step spans the exchange.
async function timedFetch(url, init) {
  const step = { kind: "model", name: MODEL, start_ns: nowNs() };
  try {
    const response = await fetch(url, init);
    const body = await response.arrayBuffer();
    const streamed = (response.headers.get("content-type") || "").startsWith("text/event-stream");
    if (response.status >= 400) {
      step.cls = "upstream_error";
      step.call = `chat → ${response.status}`;
    } else if (streamed) {
      step.cls = "ok";
      step.call = "chat stream (includeUsage)";
    } else {
      step.cls = "ok";
      const message = JSON.parse(new TextDecoder().decode(body)).choices[0].message;
      step.call = message.tool_calls ? `chat → tool call ${message.tool_calls[0].function.name}`
        : "chat → answer";
    }
    return new Response(body, { status: response.status, statusText: response.statusText,
                                headers: response.headers });
  } finally {
    step.end_ns = nowNs();
    steps.push(step);
  }
}

const openai = createOpenAICompatible({
  name: "openai", baseURL: MODEL_URL, apiKey: "sk-fake-key-for-127.0.0.1", fetch: timedFetch,
  // streamed answers ask for their usage (stream_options.include_usage)
  includeUsage: true,
});
const model = openai.chatModel(MODEL);

const tools = {
  fetch_report: tool({
    description: "Fetch a report by id.",
    inputSchema: jsonSchema({ type: "object", properties: { report_id: { type: "integer" } } }),
    execute: async () => {
      const step = { kind: "tool", name: "fetch_report", start_ns: nowNs(),
                     call: "GET /slow (AbortSignal.timeout 300 ms)" };
      try {
        const response = await fetch(TOOL_URL + "/slow",
                                     { signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) });
        step.cls = "ok";
        return await response.text();
      } catch (error) {
        if (error.name !== "TimeoutError") throw error;
        step.cls = "client_timeout";
        throw error;
      } finally {
        step.end_ns = nowNs();
        steps.push(step);
      }
    },
  }),
  create_ticket: tool({
    description: "Open a ticket.",
    inputSchema: jsonSchema({ type: "object", properties: { title: { type: "string" } } }),
    execute: async ({ title }) => {
      const step = { kind: "tool", name: "create_ticket", start_ns: nowNs(), call: "POST /write",
                     side_effect: "write" };
      try {
        const response = await fetch(TOOL_URL + "/write", {
          method: "POST", body: JSON.stringify({ title }),
        });
        if (response.status !== 201) throw new Error(`write got ${response.status}`);
        step.cls = "ok";
        return await response.text();
      } finally {
        step.end_ns = nowNs();
        steps.push(step);
      }
    },
  }),
};

const runs = [];
async function run(budgetMs, note, body) {
  steps = [];
  const first = await modelRequestsSoFar();
  const record = { agent: AGENT, budget_ms: budgetMs, note, start_ns: nowNs() };
  // the root starts at the instant the harness counts as the run's start (HrTime [s, ns])
  const startTime = [Number(record.start_ns / 1000000000n), Number(record.start_ns % 1000000000n)];
  await tracer.startActiveSpan("support request",
    { attributes: { "budget.total_ms": budgetMs }, startTime },
    async (root) => {
      record.trace_id = root.spanContext().traceId;
      try { await body(); } finally { root.end(); }
    });
  record.end_ns = nowNs();
  record.model_requests = [first, await modelRequestsSoFar()];
  record.steps = steps;
  runs.push(record);
}

const telemetry = { isEnabled: true, functionId: "support-request" };

// Run 1: the deadline (250 ms) falls inside fetch_report, which the tool's own abort ends.
await script({ do: "tool_call", name: "fetch_report", arguments: { report_id: 7 } },
             { do: "tool_call", name: "create_ticket", arguments: { title: "late" } },
             { do: "ok", text: "done" });
await run(250, "deadline inside fetch_report, aborted by its timeout signal", async () => {
  const result = await generateText({ model, tools, prompt: "summarise report 7", maxRetries: 0,
                                      stopWhen: stepCountIs(5), experimental_telemetry: telemetry });
  if (result.text !== "done") throw new Error(`unexpected answer ${result.text}`);
});

// Run 2: the model answers 503 and generateText fails.
await script({ do: "status", code: 503 });
await run(10000, "model 503, run fails", async () => {
  try {
    await generateText({ model, tools, prompt: "again", maxRetries: 0,
                         experimental_telemetry: telemetry });
    throw new Error("the 503 did not reach the app");
  } catch (error) {
    if (!APICallError.isInstance(error) && !APICallError.isInstance(error.lastError)) {
      throw error;
    }
  }
});

// Run 3: streamText, its answer streamed with the usage chunk it asked for (includeUsage):
// ai.streamText above ai.streamText.doStream, the outer span again the sum over its steps.
await script({ do: "slow", seconds: 0.2, then: { do: "ok", text: "streamed and counted" } });
await run(10000, "streamText after 0.2 s, with its usage", async () => {
  const result = streamText({ model, prompt: "stream it", maxRetries: 0,
                              experimental_telemetry: telemetry });
  const text = await result.text;
  if (text !== "streamed and counted") throw new Error(`unexpected answer ${text}`);
  await result.usage;
});

await provider.shutdown();

const versions = {};
for (const name of ["ai", "@ai-sdk/openai-compatible", "@opentelemetry/sdk-trace-node",
                    "@opentelemetry/exporter-trace-otlp-proto"]) {
  const manifest = `${process.cwd()}/node_modules/${name}/package.json`;
  versions[name] = JSON.parse(readFileSync(manifest, "utf8")).version;
}
const raw = { library: "vercel_ai", versions, node: process.version, http_semconv: "n/a",
              notes: [], raw_runs: runs };
writeFileSync(process.env.TRUTH_PATH,
              JSON.stringify(raw, (key, value) => typeof value === "bigint" ? String(value) : value,
                             1));
