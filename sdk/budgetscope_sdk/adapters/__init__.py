"""Adapters that let a RunBudget drive an agent framework without rewriting its tools. Each
module imports its framework; import only the one you use."""
