// A Vercel AI SDK agent (`ai` 6.x generateText with tools and experimental_telemetry) whose
// model is the SDK's own MockLanguageModelV3, answering from the fake model server over HTTP
// (its 503s become the SDK's APICallError). Spans go out through the OTel Node SDK's OTLP
// http/protobuf exporter to the capture receiver. Writes the harness's raw ground truth; the
// generator computes culprit and holder from it (tests/real_fixtures/scenarios/harness.py).
import { readFileSync, writeFileSync } from "node:fs";

import { trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { APICallError, generateText, jsonSchema, stepCountIs, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";

const MODEL_URL = process.env.FAKE_MODEL_URL;
const TOOL_URL = process.env.FAKE_TOOL_URL;
const CLIENT_TIMEOUT_MS = 300;
const MODEL = "mock-model-id";
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

// The mock model asks the fake server; the harness times each call itself.
const model = new MockLanguageModelV3({
  modelId: MODEL,
  doGenerate: async () => {
    const step = { kind: "model", name: MODEL, start_ns: nowNs() };
    try {
      const response = await fetch(MODEL_URL + "/chat/completions", {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, messages: [] }),
      });
      const text = await response.text();
      if (response.status >= 400) {
        step.cls = "upstream_error";
        step.call = `chat → ${response.status}`;
        // as @ai-sdk/openai does: the error body's own message becomes the error's message
        throw new APICallError({
          message: JSON.parse(text).error.message, url: MODEL_URL, requestBodyValues: {},
          statusCode: response.status, responseBody: text, isRetryable: false,
        });
      }
      const message = JSON.parse(text).choices[0].message;
      step.cls = "ok";
      const usage = { inputTokens: { total: 11, noCache: 11, cacheRead: 0, cacheWrite: 0 },
                      outputTokens: { total: 7, text: 7, reasoning: 0 } };
      if (message.tool_calls) {
        const call = message.tool_calls[0];
        step.call = `chat → tool call ${call.function.name}`;
        return {
          content: [{ type: "tool-call", toolCallId: call.id, toolName: call.function.name,
                      input: call.function.arguments }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [],
        };
      }
      step.call = "chat → answer";
      return { content: [{ type: "text", text: message.content }],
               finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
    } finally {
      step.end_ns = nowNs();
      steps.push(step);
    }
  },
});

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

await provider.shutdown();

const versions = {};
for (const name of ["ai", "@opentelemetry/sdk-trace-node",
                    "@opentelemetry/exporter-trace-otlp-proto"]) {
  const manifest = `${process.cwd()}/node_modules/${name}/package.json`;
  versions[name] = JSON.parse(readFileSync(manifest, "utf8")).version;
}
const raw = { library: "vercel_ai", versions, node: process.version, http_semconv: "n/a",
              notes: [], raw_runs: runs };
writeFileSync(process.env.TRUTH_PATH,
              JSON.stringify(raw, (key, value) => typeof value === "bigint" ? String(value) : value,
                             1));
