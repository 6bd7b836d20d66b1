-- prune_failed: delete failed-job records that failed before a point in time.
-- KEYS[1]  failed_jobs            hash: uuid -> failed-job record (JSON)
-- KEYS[2]  failed_jobs:index      set: uuid, score = failed_at (server time, seconds)
-- ARGV[1]  age in seconds: records that failed more than this long ago (by Redis's clock)
--          are deleted
-- ARGV[2]  how many records to delete at most in this call
-- Returns how many were deleted; the caller calls again while that equals ARGV[2].
return forget_failed_before(KEYS[1], KEYS[2], now_seconds_precise() - tonumber(ARGV[1]),
  tonumber(ARGV[2]))
