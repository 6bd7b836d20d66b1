-- retry: push a failed job back onto its queue and remove its failed-job record, if the record
-- is still the one the caller read. On one server; on a Redis Cluster the store and the queue
-- are in different slots, and retry_push.lua then forget_unchanged.lua take the two steps.
-- KEYS[1]  failed_jobs            hash: uuid -> failed-job record (JSON)
-- KEYS[2]  failed_jobs:index      set: uuid, score = failed_at
-- KEYS[3]  queues:<name>          ready list of the record's queue
-- KEYS[4]  queues:<name>:notify   wake-up tokens
-- ARGV[1]  the job's uuid
-- ARGV[2]  the record as the caller read it, byte for byte
-- KEYS[5]  the unique lock of a unique job, optional: taken again for the retried job
-- ARGV[3]  the payload to push: the record's payload with its counters set to 0
-- ARGV[4]  with KEYS[5], how long the lock lasts, in milliseconds
-- Returns 1 when the job was pushed, 0 when the record is gone or has changed (the job failed
-- again meanwhile, or someone else retried or forgot it), 2 when another job holds the unique
-- lock: then nothing changes.
-- The caller builds the payload, so the script decodes no JSON.
if redis.call('hget', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
if KEYS[5] and not retake_unique(KEYS[5], ARGV[1], ARGV[4]) then
  return 2
end
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('rpush', KEYS[3], ARGV[3])
redis.call('rpush', KEYS[4], '1')
return 1
