-- name: price_override_insert
-- Store a price entry (after price_override_delete removed the one it replaces).
INSERT INTO price_overrides VALUES ($model_pattern, $provider, $from_ns, $input_rate,
                                    $output_rate, $cache_read_rate, $cache_write_rate, now())
