\set s random(1, 9223372036854775806)
INSERT INTO processed (client_id, seq) VALUES (:client_id, :s) ON CONFLICT DO NOTHING;
