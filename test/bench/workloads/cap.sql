\set k random(1, 1000)
\set s random(1, 9223372036854775806)
SELECT idempotent_increment('cap', :k::text, :client_id, :s, 1);
