-- retry_push: the first step of a retry on a Redis Cluster, in the queue's slot: push a failed
-- job back onto its queue once for the failure it was recorded with. The record is removed
-- after, by forget_unchanged.lua in the store's slot; a retry taken again after a crash between
-- the two finds the guard and pushes nothing twice. The guard holds when the failure was
-- recorded: a job that fails again can write a record the same byte for byte (in the same
-- second, with the same exception), and that new failure is pushed back too.
-- KEYS[1]  queues:{<name>}                  ready list of the record's queue
-- KEYS[2]  queues:{<name>}:notify           wake-up tokens
-- KEYS[3]  queues:{<name>}:retried:<uuid>   the guard of the job's retries: the failure time
--          (ARGV[3]) of the last failure pushed back
-- KEYS[4]  the unique lock of a unique job, optional: taken again for the retried job
-- ARGV[1]  the job's uuid
-- ARGV[2]  the payload to push: the record's payload with its counters set to 0
-- ARGV[3]  when the failure was recorded: the record's score in failed_jobs:index, as read
-- ARGV[4]  how long the guard lasts, in seconds
-- ARGV[5]  with KEYS[4], how long the lock lasts, in milliseconds
-- Returns 1 when the job was pushed now or by an earlier try of this retry, 2 when another job
-- holds the unique lock: then nothing changes.
if redis.call('get', KEYS[3]) == ARGV[3] then
  return 1
end
if KEYS[4] and not retake_unique(KEYS[4], ARGV[1], ARGV[5]) then
  return 2
end
redis.call('set', KEYS[3], ARGV[3], 'ex', tonumber(ARGV[4]))
redis.call('rpush', KEYS[1], ARGV[2])
redis.call('rpush', KEYS[2], '1')
return 1
