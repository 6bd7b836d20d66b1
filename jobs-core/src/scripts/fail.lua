-- fail: record a job in the failed-job store, removing its reservation, and prune the store.
-- KEYS[1]  queues:<name>:reserved
-- KEYS[2]  failed_jobs         hash: uuid -> failed-job record (JSON)
-- KEYS[3]  failed_jobs:index   set: uuid, score = failed_at (seconds, with microseconds, so
--                               that failures within one second keep their order)
-- ARGV[1]  the reserved copy as pop returned it, or '' for a job that was never reserved
-- ARGV[2]  the job's uuid
-- ARGV[3]  the failed-job record
-- ARGV[4]  how many failed jobs to keep at most
-- ARGV[5]  how long to keep failed jobs, in seconds
-- Returns 1 when recorded, 0 when the reservation is no longer held: then nothing changes.
if ARGV[1] ~= '' and redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local time = redis.call('time')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000
redis.call('hset', KEYS[2], ARGV[2], ARGV[3])
redis.call('zadd', KEYS[3], now, ARGV[2])

-- Pruning is bounded per call; every failure prunes a little more.
local expired = redis.call('zrangebyscore', KEYS[3], '-inf', now - tonumber(ARGV[5]), 'limit', 0, 1000)
if #expired > 0 then
  redis.call('hdel', KEYS[2], unpack(expired))
  redis.call('zrem', KEYS[3], unpack(expired))
end
local excess = redis.call('zcard', KEYS[3]) - tonumber(ARGV[4])
if excess > 0 then
  local oldest = redis.call('zrange', KEYS[3], 0, math.min(excess, 1000) - 1)
  redis.call('hdel', KEYS[2], unpack(oldest))
  redis.call('zremrangebyrank', KEYS[3], 0, #oldest - 1)
end
return 1
