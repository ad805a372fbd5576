-- macros: lenient casts for attribute values, which agents send as numbers, as strings of
-- numbers ("1500", "1500.0") or in odd case. Used when typing attributes on insert.

-- An integer from 1500, "1500" or "1500.0"; NULL for 1500.5, "abc" or a value out of range.
CREATE OR REPLACE MACRO budgetscope_int(value) AS coalesce(
    TRY_CAST(value AS BIGINT),
    CASE WHEN TRY_CAST(value AS DOUBLE) = floor(TRY_CAST(value AS DOUBLE))
              AND abs(TRY_CAST(value AS DOUBLE)) < 9.2e18
         THEN TRY_CAST(TRY_CAST(value AS DOUBLE) AS BIGINT) END);

-- An enumerated label (budget.outcome, …): compared case-insensitively, so stored lowercased.
CREATE OR REPLACE MACRO budgetscope_label(value) AS nullif(lower(trim(value)), '');

CREATE OR REPLACE MACRO budgetscope_bool(value) AS CASE lower(trim(value))
    WHEN 'true' THEN true WHEN '1' THEN true WHEN 'yes' THEN true
    WHEN 'false' THEN false WHEN '0' THEN false WHEN 'no' THEN false END;

-- The gRPC status as a number, from a number or a status name such as DEADLINE_EXCEEDED.
CREATE OR REPLACE MACRO budgetscope_grpc_code(value) AS coalesce(
    budgetscope_int(value),
    MAP {'OK': 0, 'CANCELLED': 1, 'UNKNOWN': 2, 'INVALID_ARGUMENT': 3, 'DEADLINE_EXCEEDED': 4,
         'NOT_FOUND': 5, 'ALREADY_EXISTS': 6, 'PERMISSION_DENIED': 7, 'RESOURCE_EXHAUSTED': 8,
         'FAILED_PRECONDITION': 9, 'ABORTED': 10, 'OUT_OF_RANGE': 11, 'UNIMPLEMENTED': 12,
         'INTERNAL': 13, 'UNAVAILABLE': 14, 'DATA_LOSS': 15, 'UNAUTHENTICATED': 16}
        [upper(trim(value))]);
