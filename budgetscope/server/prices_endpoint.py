"""`/prices` on serve's OTLP/HTTP port: `budgetscope prices` carried out by the server that holds
the database (docs/metrics.md §8, §11.3), as /budgets carries out `budgetscope budgets`
(budgets_endpoint.py: the same token, JSON only, a pool of its own).

- `GET /prices`: `{"overrides": [...], "bundled": {"name", "version", "models"},
  "unpriced": [...]}` (what `prices list` and `prices check` print).
- `POST /prices` with `Content-Type: application/json` and a change `{"action": "set"|"unset",
  "model": PATTERN, "provider": P, "from_ns": N, "input_rate": ..., "output_rate": ...,
  "cache_read_rate": ..., "cache_write_rate": ...}` (rates in pico-dollars per million tokens):
  stored through the single writer; answered once the runs it re-prices are re-measured
  (`"derived": true`) or after the wait gives up (`false`: still re-measuring).
"""

from __future__ import annotations

from typing import Any

from budgetscope.server.budgets_endpoint import DeclarationEndpoint
from ingest.receivers.auth import BearerToken
from store import DeclaredPrices, PriceChange, PriceError

PATH = "/prices"


class PricesEndpoint(DeclarationEndpoint):
    path = PATH
    thread_name = "budgetscope-prices"
    refused = (PriceError,)

    def __init__(self, service: DeclaredPrices, token: BearerToken) -> None:
        super().__init__(token)
        self.service = service

    def listing(self) -> dict[str, Any]:
        return self.service.listing()

    def change(self, payload: Any) -> dict[str, Any]:
        return self.service.apply(PriceChange.from_json(payload)).to_json()
