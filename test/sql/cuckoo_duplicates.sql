--
-- Duplicate-heavy columns: a key's rows beyond its two
-- buckets go to a posting list behind one pointer slot, so lookups of other
-- keys read the bucket page alone, a key with r rows reads about
-- r / (slots per page) + 2 pages, and VACUUM frees list pages for reuse.
-- Pages read are counted with the transaction's buffer statistics of the
-- index (blocks fetched: hits and reads).
--
-- The tables are temporary, so that what VACUUM removes does not depend on
-- the snapshots of other sessions (the fbf worker's, autovacuum's) that
-- may be open in this database at that moment.
--
CREATE TEMP TABLE dup (id int8, k int8);
CREATE INDEX dup_k ON dup USING cuckoo (k);

CREATE FUNCTION dup_index_pages(query text) RETURNS int8
LANGUAGE plpgsql AS $$
DECLARE
	before int8 := pg_stat_get_xact_blocks_fetched('dup_k'::regclass);
BEGIN
	EXECUTE query;
	RETURN pg_stat_get_xact_blocks_fetched('dup_k'::regclass) - before;
END $$;

SET enable_seqscan = off;
SET enable_bitmapscan = off;

-- 2,000 keys x 100 rows, inserted round robin into an empty index
INSERT INTO dup SELECT g, g % 2000 FROM generate_series(1, 200000) g;
SELECT entries, heap_tuples FROM cuckoo_index_verify('dup_k');

-- 1,000 lookups of absent keys: at most 3 index pages each (a page each)
SELECT dup_index_pages($q$
	SELECT count(*) FROM dup
	WHERE k = ANY (ARRAY(SELECT 100000 + g FROM generate_series(1, 1000) g))
$q$) BETWEEN 1000 AND 3000 AS absent_at_most_3_pages;

-- a present key with 100 rows: its bucket page, its list's head and page
SELECT dup_index_pages('SELECT count(*) FROM dup WHERE k = 7') <= 3
	AS present_reads_its_list;
SELECT count(*) FROM dup WHERE k = 7;

-- 400 keys x 250 rows into another empty index
CREATE TEMP TABLE dup2 (id int8, k int8);
CREATE INDEX dup2_k ON dup2 USING cuckoo (k);
INSERT INTO dup2 SELECT g, g % 400 FROM generate_series(1, 100000) g;
SELECT entries, heap_tuples FROM cuckoo_index_verify('dup2_k');
CREATE FUNCTION dup2_index_pages(query text) RETURNS int8
LANGUAGE plpgsql AS $$
DECLARE
	before int8 := pg_stat_get_xact_blocks_fetched('dup2_k'::regclass);
BEGIN
	EXECUTE query;
	RETURN pg_stat_get_xact_blocks_fetched('dup2_k'::regclass) - before;
END $$;
SELECT dup2_index_pages($q$
	SELECT count(*) FROM dup2
	WHERE k = ANY (ARRAY(SELECT 100000 + g FROM generate_series(1, 1000) g))
$q$) BETWEEN 1000 AND 3000 AS absent_at_most_3_pages;
SELECT dup2_index_pages('SELECT count(*) FROM dup2 WHERE k = 7') <= 3
	AS present_reads_its_list;

-- VACUUM: the lists of deleted keys end, their pages are freed, and the
-- next load (of other keys, in other bucket pages) reuses them instead of
-- growing the index
DELETE FROM dup WHERE k < 1000;
VACUUM dup;
SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('dup_k');
SELECT pg_relation_size('dup_k') AS size_before \gset
INSERT INTO dup SELECT g, 5000 + g % 1000 FROM generate_series(1, 100000) g;
SELECT pg_relation_size('dup_k') <= :size_before AS freed_pages_reused;
SELECT entries, heap_tuples FROM cuckoo_index_verify('dup_k');
SELECT count(*) FROM dup WHERE k = 7;

-- a REINDEX lays the lists out too
REINDEX INDEX dup_k;
SELECT entries, heap_tuples FROM cuckoo_index_verify('dup_k');
SELECT dup_index_pages($q$
	SELECT count(*) FROM dup
	WHERE k = ANY (ARRAY(SELECT 100000 + g FROM generate_series(1, 1000) g))
$q$) BETWEEN 1000 AND 3000 AS absent_at_most_3_pages;
SELECT dup_index_pages('SELECT count(*) FROM dup WHERE k = 7') <= 3
	AS present_reads_its_list;

-- VACUUM of some rows of every key: lists shrink, pages merge, nothing lost
DELETE FROM dup WHERE id % 3 = 0;
VACUUM dup;
SELECT entries, heap_tuples, dead_entries FROM cuckoo_index_verify('dup_k');
SELECT count(*) = (SELECT count(*) FROM dup WHERE k + 0 = 7) AS same_rows
FROM dup WHERE k = 7;

RESET enable_seqscan;
RESET enable_bitmapscan;
DROP TABLE dup, dup2;
DROP FUNCTION dup_index_pages(text), dup2_index_pages(text);
