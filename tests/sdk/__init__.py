"""The budget SDK's tests (sdk/, its own distribution): its arithmetic on a manual clock, its
spans read back from the real OpenTelemetry SDK, its calls against real servers on 127.0.0.1,
its wheel alone, its README and example agent, and the runs it records read by budgetscope.
What only they share is in tests/sdk/support/; what they share with the product's tests (a
running `budgetscope serve`, trace files, a store) is in tests/support/."""
