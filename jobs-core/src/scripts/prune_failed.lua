-- prune_failed: delete failed-job records that failed before a point in time.
-- KEYS[1]  failed_jobs            hash: uuid -> failed-job record (JSON)
-- KEYS[2]  failed_jobs:index      set: uuid, score = failed_at (server time, seconds)
-- ARGV[1]  age in seconds: records that failed more than this long ago (by Redis's clock)
--          are deleted
-- ARGV[2]  how many records to delete at most in this call
-- Returns how many were deleted; the caller calls again while that equals ARGV[2].
local time = redis.call('time')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000
local old = redis.call('zrangebyscore', KEYS[2], '-inf', now - tonumber(ARGV[1]), 'limit', 0,
  tonumber(ARGV[2]))
if #old > 0 then
  redis.call('hdel', KEYS[1], unpack(old))
  redis.call('zrem', KEYS[2], unpack(old))
end
return #old
