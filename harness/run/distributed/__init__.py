"""A run split across processes or hosts, in one place: one shard's side (sharding), the parent's workers as
local processes (workers) or Ray actors (ray_actors), the parent's end of their relay lines (hub), the whole
conducted from one call (conduct), and the shards joined into one run directory (merge)."""
