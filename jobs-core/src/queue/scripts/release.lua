-- release: give a reserved job back, to run again after a delay (always via :delayed), and
-- free the holds it keeps only while it runs.
-- KEYS[1]  queues:<name>:reserved
-- KEYS[2]  queues:<name>:delayed
-- KEYS[3]  queues:<name>:notify
-- KEYS[4..] keys the job holds while it runs (overlap lock, funnel slot), freed here
-- ARGV[1]  the reserved copy, byte for byte as pop returned it
-- ARGV[2]  delay in seconds (>= 0, may have a fraction)
-- ARGV[3]  the payload to put back: '' for the reserved copy itself, else a replacement the
--          worker built (a requeue that costs no attempt lowers its attempts)
-- ARGV[4..] the owner of each held key, in the order of KEYS[4..]
-- Returns 1 when released, 0 when the reservation is no longer held: then nothing changes.
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local member = ARGV[1]
if ARGV[3] ~= '' then member = ARGV[3] end
local now = now_seconds()
redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), member)
free_holds(4, 4)
-- The released job is now the earliest one: wake an idle worker to re-arm its timer.
if redis.call('zrank', KEYS[2], member) == 0 then
  redis.call('rpush', KEYS[3], '1')
end
return 1
