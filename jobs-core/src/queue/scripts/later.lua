-- later: schedule jobs in the delayed set, due at Redis server time + delay.
-- KEYS[1]  queues:<name>:delayed  delayed set, score = due time in seconds (ms fraction)
-- KEYS[2]  queues:<name>:notify   wake-up tokens
-- ARGV     pairs: due, payload; repeated. due is either a delay in seconds from now by the
--          server's clock ("30", "1.5"), or a unix time in seconds prefixed with "@"
--          ("@1795300856.724") for a job dispatched to run at a point in time
-- Returns the number of jobs scheduled.
-- When a job becomes the earliest one it pushes a single token, so that an idle worker
-- wakes, sees the new due time and re-arms its timer. The pop script trims tokens that
-- have no ready job behind them.
local now = now_seconds()
local head = redis.call('zrange', KEYS[1], 0, 0)[1]
for i = 1, #ARGV, 2 do
  redis.call('zadd', KEYS[1], due_at(ARGV[i], now), ARGV[i + 1])
end
if redis.call('zrange', KEYS[1], 0, 0)[1] ~= head then
  redis.call('rpush', KEYS[2], '1')
end
return #ARGV / 2
