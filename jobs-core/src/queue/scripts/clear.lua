-- clear: delete every job of a queue.
-- KEYS[1]  queues:<name>
-- KEYS[2]  queues:<name>:delayed
-- KEYS[3]  queues:<name>:reserved
-- KEYS[4]  queues:<name>:notify
-- Returns the queue's size before clearing (ready + delayed + reserved).
local size = redis.call('llen', KEYS[1]) + redis.call('zcard', KEYS[2]) + redis.call('zcard', KEYS[3])
redis.call('del', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return size
