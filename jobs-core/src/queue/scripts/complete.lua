-- complete: acknowledge a finished job and free its holds in one step (rule: a side effect of
-- finishing a job happens in the same atomic step as its acknowledgement, and only if the
-- reservation was still held).
-- KEYS[1]  queues:<name>:reserved
-- KEYS[2..] keys the job holds (overlap lock, funnel slot, unique lock)
-- ARGV[1]  the reserved copy, byte for byte as pop returned it
-- ARGV[2..] the owner of each held key, in the order of KEYS[2..]
-- Returns 1 when acknowledged, 0 when the reservation is no longer held: then nothing changes.
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
free_holds(2, 2)
return 1
