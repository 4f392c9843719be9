--
-- Fuzz the fbf type's text and binary input inside the server: mutate
-- valid values at random (seeded, so the run repeats exactly) and require
-- that every input is either accepted as a value that round-trips, or
-- rejected with the input's own SQLSTATE (22P02 for text, 22P03 for binary),
-- never anything else and never a crash.  test/core/fuzz_decode runs far
-- more mutations against the same decoders outside the server.
--
SELECT setseed(0.4242);

CREATE TABLE seeds AS
SELECT fbf_send(f) AS b
FROM (VALUES (fbf_add(fbf_create(64, 1), 'x')),
             (fbf_refresh(fbf_add(fbf_add(fbf_create(200, 3, 2), 1), 2))),
             (fbf_resize(fbf_add(fbf_create(130, 2, 1), 'y'), 3))) AS v(f);

CREATE FUNCTION mutate(b bytea) RETURNS bytea
LANGUAGE plpgsql AS $$
DECLARE
	pos int;
BEGIN
	FOR i IN 1..1 + floor(random() * 3)::int LOOP
		pos := floor(random() * length(b))::int;
		CASE floor(random() * 5)::int
			WHEN 0 THEN b := set_byte(b, pos, get_byte(b, pos) # (1 << floor(random() * 8)::int));
			WHEN 1 THEN b := set_byte(b, pos, floor(random() * 256)::int);
			WHEN 2 THEN b := substr(b, 1, pos);
			WHEN 3 THEN b := substr(b, 1, pos) || '\x00'::bytea || substr(b, pos + 1);
			ELSE b := set_byte(b, floor(random() * least(32, length(b)))::int, (ARRAY[0, 1, 2, 3, 63, 64, 65, 255])[1 + floor(random() * 8)::int]);
		END CASE;
		EXIT WHEN length(b) = 0;
	END LOOP;
	RETURN b;
END $$;

-- text input: '\x' || hex of a mutated value
CREATE TABLE text_outcomes (outcome text);
DO $$
DECLARE
	v fbf;
	t text;
BEGIN
	FOR i IN 1..3000 LOOP
		t := '\x' || encode(mutate((SELECT b FROM seeds OFFSET (i % 3) LIMIT 1)), 'hex');
		BEGIN
			v := t::fbf;
			IF v::text <> lower(t) THEN
				RAISE EXCEPTION 'accepted value does not round-trip: %', t;
			END IF;
			INSERT INTO text_outcomes VALUES ('accepted');
		EXCEPTION WHEN invalid_text_representation THEN
			INSERT INTO text_outcomes VALUES ('rejected 22P02');
		END;
	END LOOP;
END $$;
SELECT outcome, count(*) > 0 AS seen FROM text_outcomes GROUP BY outcome ORDER BY outcome;

-- binary input: COPY BINARY of mutated bytea into an fbf column (fbf_recv)
CREATE TABLE fuzz_raw (b bytea);
CREATE TABLE fuzz_typed (f fbf);
CREATE TABLE binary_outcomes (outcome text);
DO $$
DECLARE
	path text := '/tmp/fbf_regress_fuzz.bin';
BEGIN
	FOR i IN 1..600 LOOP
		TRUNCATE fuzz_raw;
		INSERT INTO fuzz_raw SELECT mutate(b) FROM seeds OFFSET (i % 3) LIMIT 1;
		EXECUTE format('COPY fuzz_raw TO %L WITH (FORMAT binary)', path);
		BEGIN
			EXECUTE format('COPY fuzz_typed FROM %L WITH (FORMAT binary)', path);
			INSERT INTO binary_outcomes VALUES ('accepted');
		EXCEPTION WHEN invalid_binary_representation THEN
			INSERT INTO binary_outcomes VALUES ('rejected 22P03');
		END;
	END LOOP;
END $$;
SELECT outcome, count(*) > 0 AS seen FROM binary_outcomes GROUP BY outcome ORDER BY outcome;

-- what was accepted is a sound value: it answers and round-trips
SELECT count(*) = count(*) FILTER (WHERE fbf_send(f) = fbf_send(f::text::fbf)
                                     AND fbf_estimated_fpp(f) >= 0)
       AS accepted_values_sound
FROM fuzz_typed;
