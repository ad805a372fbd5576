"""The server's tests (`budgetscope serve`, budgetscope/server/): the read API, /budgets and
/prices, /healthz, /readyz and /metrics, the token, Host and Origin guards, logs, memory, and
serve as a real process under floods, kill -9 and a short soak."""
