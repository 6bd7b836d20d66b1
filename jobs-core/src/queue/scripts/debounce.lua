-- debounce: push a debounced job, replacing the one still waiting under its debounce id, so
-- that many dispatches within the window leave one job in Redis, with the latest data.
-- KEYS[1]  jobs:debounce:<job>:<id>   hash: payload (the waiting job's bytes), first (when
--          its window opened, Unix seconds by Redis's clock)
-- KEYS[2]  queues:<name>:delayed
-- KEYS[3]  queues:<name>:notify
-- ARGV[1]  the new payload
-- ARGV[2]  the debounce delay in seconds: the job runs this long after the last dispatch...
-- ARGV[3]  ...or this long after the first one of its window, whichever comes first
-- Returns 1 when a waiting job was replaced, 0 when a new window opened (the previous job, if
-- any, already ran or is running).
local now = now_seconds()
local previous = redis.call('hget', KEYS[1], 'payload')
local first = now
local replaced = 0
if previous and redis.call('zrem', KEYS[2], previous) == 1 then
  first = tonumber(redis.call('hget', KEYS[1], 'first')) or now
  replaced = 1
end
local due = math.min(now + tonumber(ARGV[2]), first + tonumber(ARGV[3]))
local head = redis.call('zrange', KEYS[2], 0, 0)[1]
redis.call('zadd', KEYS[2], due, ARGV[1])
redis.call('hset', KEYS[1], 'payload', ARGV[1], 'first', string.format('%.3f', first))
-- Kept until well after the job is due, so a late worker still finds it replaceable.
redis.call('expire', KEYS[1], math.ceil(due - now) + 3600)
if redis.call('zrange', KEYS[2], 0, 0)[1] ~= head then
  redis.call('rpush', KEYS[3], '1')
end
return replaced
