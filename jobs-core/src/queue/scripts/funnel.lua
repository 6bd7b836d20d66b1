-- funnel: take one of a concurrency limit's slots for a running job.
-- KEYS[1]  jobs:funnel:<name>   sorted set: owner token -> lease expiry (Unix ms, Redis's clock)
-- ARGV[1]  the owner token of the job asking
-- ARGV[2]  how many jobs may hold a slot at once
-- ARGV[3]  the lease in milliseconds; the worker's heartbeat renews it while the job runs
-- Returns 1 when the job holds a slot (a new one, or the one it held already), else 0.
-- Slots whose lease ran out (their worker died) are freed first.
local now = now_millis()
local lease = tonumber(ARGV[3])
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if not redis.call('zscore', KEYS[1], ARGV[1]) and redis.call('zcard', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('zadd', KEYS[1], now + lease, ARGV[1])
redis.call('pexpire', KEYS[1], lease)
return 1
