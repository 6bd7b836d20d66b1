-- later: schedule jobs in the delayed set, due at Redis server time + delay.
-- KEYS[1]  queues:<name>:delayed  delayed set, score = due time in seconds (ms fraction)
-- KEYS[2]  queues:<name>:notify   wake-up tokens
-- ARGV     pairs: delay in seconds (>= 0, may have a fraction), payload; repeated
-- Returns the number of jobs scheduled.
-- When a job becomes the earliest one it pushes a single token, so that an idle worker
-- wakes, sees the new due time and re-arms its timer. The pop script trims tokens that
-- have no ready job behind them.
local time = redis.call('time')
local now = tonumber(time[1]) + math.floor(tonumber(time[2]) / 1000) / 1000
local head = redis.call('zrange', KEYS[1], 0, 0)[1]
for i = 1, #ARGV, 2 do
  redis.call('zadd', KEYS[1], now + tonumber(ARGV[i]), ARGV[i + 1])
end
if redis.call('zrange', KEYS[1], 0, 0)[1] ~= head then
  redis.call('rpush', KEYS[2], '1')
end
return #ARGV / 2
