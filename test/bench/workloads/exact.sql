\set k random(1, 1000)
\set s random(1, 9223372036854775806)
WITH op AS (INSERT INTO ops VALUES (:client_id, :s) ON CONFLICT DO NOTHING RETURNING 1)
UPDATE exact SET value = value + 1 WHERE key = :k::text AND shard = 0 AND EXISTS (SELECT FROM op);
