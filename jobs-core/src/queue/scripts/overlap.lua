-- overlap: take a lock that keeps two jobs with one key from running at once.
-- KEYS[1]  jobs:overlap:<job>:<key>, or jobs:overlap:<key> when shared across job types
-- ARGV[1]  the owner token of the job asking
-- ARGV[2]  the lease in milliseconds; the worker's heartbeat renews it while the job runs
-- Returns 1 when the job holds the lock (newly, or already), else 0.
local holder = redis.call('get', KEYS[1])
if holder and holder ~= ARGV[1] then
  return 0
end
redis.call('set', KEYS[1], ARGV[1], 'px', tonumber(ARGV[2]))
return 1
