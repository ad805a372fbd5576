"""`--token` (env BUDGETSCOPE_TOKEN) for `serve` and `dashboard`: checked before anything
starts, so a token that could never be matched, or could be guessed, is a message, not a
silent open door or a lock-out.

- An empty or all-whitespace token used to mean "no token" after the banner had said "bearer
  token required": exports without a header were accepted.
- A token with a character outside printable ASCII can never match: HTTP header values travel
  as bytes that the servers decode as Latin-1 while the token was compared as UTF-8, so every
  client was refused with nothing said. Header values are ASCII in practice (RFC 9110 §5.5), and
  a bearer token is printable ASCII (RFC 6750 §2.1), so such a token is refused at start-up.
- Whitespace inside or around a token cannot be sent as one `Bearer` credential either.
- A token shorter than MIN_CHARS is refused, with how to make one: `--token a` used to be
  accepted, and wrong tokens are only slowed down (ingest/receivers/auth.py), not stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

TOKEN_ENV = "BUDGETSCOPE_TOKEN"
# 16 characters of the 94 printable ones: over 10^31 tokens, beyond any guessing at the pace
# failed attempts are allowed (one each 10 s per client after ten).
MIN_CHARS = 16
HOW_TO_MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


def token_problem(token: str) -> str | None:
    """Why `token` cannot be used as a bearer token, or None when it can."""
    if not token.strip():
        return "is empty; give a real token, or leave --token out to run without one"
    for character in token:
        if character.isspace():
            return "contains whitespace, which cannot be sent in an Authorization header"
        if not " " < character <= "~":
            return (f"contains {character!r}, which is not printable ASCII; HTTP clients send "
                    "header values as ASCII bytes, so no client could ever match it")
    if len(token) < MIN_CHARS:
        return (f"is {len(token)} characters long; a token needs at least {MIN_CHARS} so that "
                f"it cannot be guessed: make one with {HOW_TO_MAKE_ONE}")
    return None


def _check(context: click.Context, parameter: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    problem = token_problem(value)
    if problem is not None:
        source = ("the environment variable " + TOKEN_ENV
                  if context.get_parameter_source(parameter.name or "token")
                  == click.core.ParameterSource.ENVIRONMENT else "--token")
        raise click.BadParameter(f"the token {problem}", param_hint=source)
    return value


def token_option(help_text: str) -> Callable[[Any], Any]:
    """`--token TOKEN` (env BUDGETSCOPE_TOKEN), refused at start-up when unusable."""
    return click.option("--token", envvar=TOKEN_ENV, default=None, callback=_check,
                        help=f"{help_text} (env {TOKEN_ENV}); printable ASCII, no spaces, "
                             f"at least {MIN_CHARS} characters.")
