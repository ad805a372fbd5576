"""The what-if replay: stored runs re-run under another budget policy (numpy),
read through queries, drawn by the dashboard and `budgetscope simulate`."""
