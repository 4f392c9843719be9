\set s random(1, 9223372036854775806)
SELECT fbf_claim('inbox', array_fill(:client_id::bigint, ARRAY[@BATCH@]),
	ARRAY(SELECT (:s::numeric + g) % 9223372036854775807 FROM generate_series(1, @BATCH@) g)::bigint[]);
