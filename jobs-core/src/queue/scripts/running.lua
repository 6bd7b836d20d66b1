-- running: record that an attempt of a tracked job started, in its status record, unless a
-- later attempt already did or the job has settled for good. (Its `active` event, when the
-- queue's events are on, is appended by the pop that reserved it.)
-- KEYS[1]  jobs:status:<uuid>
-- ARGV[1]  the attempt (from 1)
-- ARGV[2]  the worker's id
-- ARGV[3]  the queue's name
-- ARGV[4]  the job's name
-- ARGV[5]  how long to keep the record, in ms
-- Returns 1 when recorded, 0 when left alone.
local state = redis.call('hget', KEYS[1], 'state')
if status_is_final(state) then
  return 0
end
if tonumber(redis.call('hget', KEYS[1], 'attempt') or '0') > tonumber(ARGV[1]) then
  return 0
end
redis.call('hset', KEYS[1], 'state', 'running', 'attempt', ARGV[1], 'worker', ARGV[2],
  'queue', ARGV[3], 'job', ARGV[4], 'updated_ms', now_millis())
redis.call('hdel', KEYS[1], 'error')
redis.call('pexpire', KEYS[1], ARGV[5])
return 1
