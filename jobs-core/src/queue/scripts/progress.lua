-- progress: record a running job's progress, only while that attempt runs (a late write of
-- an attempt that has settled changes nothing).
-- KEYS[1]  jobs:status:<uuid>
-- KEYS[2]  queues:<name>:events
-- ARGV[1]  the job's uuid
-- ARGV[2]  the attempt
-- ARGV[3]  the progress (JSON)
-- ARGV[4]  the job's name
-- ARGV[5]  the events stream's length ('0': events are off)
-- Returns 1 when recorded, 0 when the attempt no longer runs.
if redis.call('hget', KEYS[1], 'state') ~= 'running'
  or redis.call('hget', KEYS[1], 'attempt') ~= ARGV[2] then
  return 0
end
redis.call('hset', KEYS[1], 'progress', ARGV[3], 'updated_ms', now_millis())
if ARGV[5] ~= '0' then
  status_event(KEYS[2], ARGV[5], 'progress', ARGV[1], ARGV[4], ARGV[2], ARGV[3])
end
return 1
