-- limit: admit a job under one or more rate limits: every limit is checked first, and the job
-- is counted against all of them only when all admit it, so no limit counts a job another
-- one refused.
-- KEYS[i]  jobs:limit:<name>:<by>   sorted set of the admissions within the window:
--          member = ARGV[1] and the admission time, score = admission time in microseconds
--          (Redis's clock)
-- ARGV[1]  the admitted job's owner token
-- ARGV[2i], ARGV[2i + 1]  the most admissions of KEYS[i] within any window, and the window's
--          length in microseconds
-- Returns 0 when admitted, else how many microseconds the job should wait before trying again.
--
-- A sliding window: within any span of one window, at most the limit is admitted, by Redis's
-- clock. A refused job is told to come back when room is expected for it: the moment the
-- oldest admission leaves the window, spread by one admission interval per job already told
-- to wait (kept in <key>:waiting), so a backlog comes back one by one instead of all at once.
local time = redis.call('time')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local wait = 0
for i, key in ipairs(KEYS) do
  local max = tonumber(ARGV[2 * i])
  local window = tonumber(ARGV[2 * i + 1])
  redis.call('zremrangebyscore', key, '-inf', now - window)
  if redis.call('zcard', key) >= max then
    local oldest = tonumber(redis.call('zrange', key, 0, 0, 'withscores')[2])
    local waiting = key .. ':waiting'
    local turn = math.max(oldest + window, tonumber(redis.call('get', waiting) or 0))
    local interval = math.ceil(window / max)
    redis.call('set', waiting, string.format('%.0f', turn + interval), 'px',
      math.ceil((turn + interval - now) / 1000) + 1)
    wait = math.max(wait, turn - now)
  end
end
if wait > 0 then
  return wait
end
for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[2 * i + 1])
  redis.call('zadd', key, now, ARGV[1] .. ':' .. now)
  redis.call('pexpire', key, math.ceil(window / 1000) + 1)
end
return 0
