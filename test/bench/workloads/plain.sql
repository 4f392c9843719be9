\set k random(1, 1000)
UPDATE plain SET value = value + 1 WHERE key = :k::text AND shard = 0;
