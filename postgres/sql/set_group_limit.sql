-- Set how many jobs of a group may run at once.
INSERT INTO readpast_groups (group_key, max_running) VALUES ($1, $2)
ON CONFLICT (group_key) DO UPDATE SET max_running = EXCLUDED.max_running;
