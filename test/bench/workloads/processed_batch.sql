\set s random(1, 9223372036854775806)
INSERT INTO processed (client_id, seq)
	SELECT :client_id, (:s::numeric + g) % 9223372036854775807 FROM generate_series(1, @BATCH@) g
	ON CONFLICT DO NOTHING;
