-- running: record that an attempt of a job started, in its status record and in its queue's
-- events stream, unless a later attempt already did or the job has settled for good.
-- KEYS[1]  jobs:status:<uuid>
-- KEYS[2]  queues:<name>:events
-- ARGV[1]  the job's uuid
-- ARGV[2]  the attempt (from 1)
-- ARGV[3]  the worker's id
-- ARGV[4]  the queue's name
-- ARGV[5]  the job's name
-- ARGV[6]  how long to keep the record, in ms ('0': the job is not tracked, and keeps none)
-- ARGV[7]  the events stream's length ('0': events are off)
-- Returns 1 when recorded, 0 when left alone.
if ARGV[6] ~= '0' then
  local state = redis.call('hget', KEYS[1], 'state')
  if status_is_final(state) then
    return 0
  end
  if tonumber(redis.call('hget', KEYS[1], 'attempt') or '0') > tonumber(ARGV[2]) then
    return 0
  end
  redis.call('hset', KEYS[1], 'state', 'running', 'attempt', ARGV[2], 'worker', ARGV[3],
    'queue', ARGV[4], 'job', ARGV[5], 'updated_ms', now_millis())
  redis.call('hdel', KEYS[1], 'error')
  redis.call('pexpire', KEYS[1], ARGV[6])
end
if ARGV[7] ~= '0' then
  status_event(KEYS[2], ARGV[7], 'active', ARGV[1], ARGV[5], ARGV[2], '')
end
return 1
