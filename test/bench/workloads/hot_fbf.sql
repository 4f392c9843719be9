\set s random(1, 9223372036854775806)
SELECT idempotent_increment('hot_idem', 'hot', :client_id, :s, 1);
