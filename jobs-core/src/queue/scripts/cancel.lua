-- cancel: ask for a job to stop. A job that settled for good is left alone; any other is
-- flagged in jobs:cancel, which workers read before they run a job (a waiting one is then
-- settled as cancelled without running) and while it runs, and signalled on
-- jobs:cancel:signals, which stops a running one within milliseconds. Flags older than
-- ARGV[2] are pruned, a bounded number per call.
-- KEYS[1]  jobs:status:<uuid>
-- KEYS[2]  jobs:cancel
-- KEYS[3]  jobs:cancel:signals
-- KEYS[4]  failed_jobs (the failed-job store, on one server; on a cluster the caller checks it)
-- ARGV[1]  the job's uuid
-- ARGV[2]  how long a flag is kept, in ms
-- Returns the job's state as its record says before the request ('' when it has none), or
-- 'failed' for an untracked job in the failed-job store; a final state means nothing was
-- flagged.
local state = redis.call('hget', KEYS[1], 'state') or ''
if state == '' and KEYS[4] and redis.call('hexists', KEYS[4], ARGV[1]) == 1 then
  return 'failed'
end
if status_is_final(state) then
  return state
end
local now = now_millis()
redis.call('zadd', KEYS[2], now, ARGV[1])
redis.call('xadd', KEYS[3], 'maxlen', '~', 1000, '*', 'uuid', ARGV[1])
local stale = redis.call('zrangebyscore', KEYS[2], '-inf', now - tonumber(ARGV[2]), 'limit', 0, 1000)
if #stale > 0 then
  redis.call('zrem', KEYS[2], unpack(stale))
end
return state
