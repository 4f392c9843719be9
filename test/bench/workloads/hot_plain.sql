UPDATE hot_plain SET value = value + 1 WHERE key = 'hot' AND shard = 0;
