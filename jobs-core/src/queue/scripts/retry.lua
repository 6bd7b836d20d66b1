-- retry: push a failed job back onto its queue and remove its failed-job record, if the record
-- is still the one the caller read.
-- KEYS[1]  failed_jobs            hash: uuid -> failed-job record (JSON)
-- KEYS[2]  failed_jobs:index      set: uuid, score = failed_at
-- KEYS[3]  queues:<name>          ready list of the record's queue
-- KEYS[4]  queues:<name>:notify   wake-up tokens
-- ARGV[1]  the job's uuid
-- ARGV[2]  the record as the caller read it, byte for byte
-- ARGV[3]  the payload to push: the record's payload with its attempts set to 0
-- Returns 1 when the job was pushed, 0 when the record is gone or has changed (the job failed
-- again meanwhile, or someone else retried or forgot it): then nothing changes.
-- The caller builds the payload, so the script decodes no JSON.
if redis.call('hget', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('rpush', KEYS[3], ARGV[3])
redis.call('rpush', KEYS[4], '1')
return 1
