\set s random(1, 9223372036854775806)
SELECT fbf_claim('inbox', :client_id::bigint, :s::bigint);
