-- forget_unchanged: remove a failed job's record if it is still the one the caller read: the
-- last step of a retry on a Redis Cluster (after retry_push.lua), in the store's slot. A job
-- that failed again since, with a new record or the same bytes recorded at a new time, keeps it.
-- KEYS[1]  failed_jobs            hash: uuid -> failed-job record (JSON)
-- KEYS[2]  failed_jobs:index      set: uuid, score = failed_at
-- ARGV[1]  the job's uuid
-- ARGV[2]  the record as the caller read it, byte for byte
-- ARGV[3]  its score in the index as the caller read it ('' for none)
-- Returns 1 when removed, 0 when the record is gone or has changed.
if redis.call('hget', KEYS[1], ARGV[1]) ~= ARGV[2]
  or (redis.call('zscore', KEYS[2], ARGV[1]) or '') ~= ARGV[3] then
  return 0
end
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('zrem', KEYS[2], ARGV[1])
return 1
