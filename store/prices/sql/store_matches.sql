-- name: store_matches
-- Keep the matches of new pairs and the prices of the bundled models they matched (registered as incoming_matches, incoming_conditions, incoming_prices).
INSERT INTO price_matches BY NAME SELECT *, now() AS matched_at FROM incoming_matches;
INSERT INTO bundled_conditions BY NAME
SELECT * FROM incoming_conditions
WHERE bundled_ref NOT IN (SELECT bundled_ref FROM bundled_conditions);
INSERT INTO bundled_prices BY NAME
SELECT * FROM incoming_prices
WHERE bundled_ref NOT IN (SELECT bundled_ref FROM bundled_prices);
