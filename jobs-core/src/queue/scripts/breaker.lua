-- breaker: an exception throttle (circuit breaker) per key: once a key has seen the most
-- errors allowed within its window, jobs with that key wait until the window ends.
-- KEYS[1]  jobs:breaker:<key>   the count of errors in the current window, expiring with it
-- ARGV[1]  'check', 'hit' or 'clear'
-- ARGV[2]  the most errors allowed within a window
-- ARGV[3]  the window in milliseconds
-- Returns, for 'check': 0 when the breaker is closed, else the milliseconds until it closes;
-- for 'hit' and 'clear': 0.
if ARGV[1] == 'clear' then
  redis.call('del', KEYS[1])
  return 0
elseif ARGV[1] == 'hit' then
  if redis.call('incr', KEYS[1]) == 1 then
    redis.call('pexpire', KEYS[1], tonumber(ARGV[3]))
  end
  return 0
end
local errors = tonumber(redis.call('get', KEYS[1]) or 0)
if errors < tonumber(ARGV[2]) then
  return 0
end
return math.max(1, redis.call('pttl', KEYS[1]))
