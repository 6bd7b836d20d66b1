-- release: give a reserved job back, to run again after a delay (always via :delayed).
-- KEYS[1]  queues:<name>:reserved
-- KEYS[2]  queues:<name>:delayed
-- KEYS[3]  queues:<name>:notify
-- ARGV[1]  the reserved copy, byte for byte as pop returned it
-- ARGV[2]  delay in seconds (>= 0, may have a fraction)
-- Returns 1 when released, 0 when the reservation is no longer held: then nothing changes.
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local now = now_seconds()
redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
-- The released job is now the earliest one: wake an idle worker to re-arm its timer.
if redis.call('zrank', KEYS[2], ARGV[1]) == 0 then
  redis.call('rpush', KEYS[3], '1')
end
return 1
