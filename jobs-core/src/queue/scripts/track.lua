-- track: start the status record of a tracked job as it is pushed, unless it has one already
-- (a worker may have reserved it first).
-- KEYS[1]  jobs:status:<uuid>
-- ARGV[1]  its state: 'queued' or 'delayed'
-- ARGV[2]  the queue's name
-- ARGV[3]  the job's name
-- ARGV[4]  how long to keep the record, in ms: until the job is due, and a day more
-- Returns 1 when the record was made, 0 when there was one.
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('hset', KEYS[1], 'state', ARGV[1], 'queue', ARGV[2], 'job', ARGV[3],
  'attempt', '0', 'updated_ms', now_millis())
redis.call('pexpire', KEYS[1], ARGV[4])
return 1
