-- claim_hooks: take the failed() hooks whose worker did not report them done in time.
-- KEYS[1]  failed_jobs:hooks   set: uuid, score = when a worker may run its hook (again)
-- ARGV[1]  how long the claim lasts, in seconds: another worker may take the hook after that
-- ARGV[2]  how many hooks to take at most
-- Returns the uuids taken. Each one's score moves to now + ARGV[1], so no other worker takes
-- it meanwhile; the worker removes it once the hook has run.
local now = now_seconds_precise()
local due = redis.call('zrangebyscore', KEYS[1], '-inf', now, 'limit', 0, tonumber(ARGV[2]))
for _, uuid in ipairs(due) do
  redis.call('zadd', KEYS[1], now + tonumber(ARGV[1]), uuid)
end
return due
