-- release: give a reserved job back, to run again after a delay (always via :delayed), and
-- apply what releasing it changes, in one step and only if its reservation was still held.
-- KEYS[1]  queues:<name>:reserved
-- KEYS[2]  queues:<name>:delayed
-- KEYS[3]  queues:<name>:notify
-- KEYS[4..] the keys of the effects, in turn (lib/effects.lua)
-- ARGV[1]  the reserved copy, byte for byte as pop returned it
-- ARGV[2]  delay in seconds (>= 0, may have a fraction)
-- ARGV[3]  the payload to put back: '' for the reserved copy itself, else a replacement the
--          worker built (a requeue that costs no attempt lowers its attempts)
-- ARGV[4..] the effects, each its name and its arguments, applied in turn by apply_effects
--          (lib/effects.lua):
--          'holds'   free what the job held while it ran (lib/holds.lua)
--          'status'  record it released, in its status and its queue's events (lib/status.lua)
--          'group'   a job of a group ended: its group comes back (lib/groups.lua)
-- Returns 1 when released, 0 when the reservation is no longer held: then nothing changes.
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local member = ARGV[1]
if ARGV[3] ~= '' then member = ARGV[3] end
local now = now_seconds()
redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), member)
local unknown = apply_effects(effects_from(4, 4), {
  holds = holds_freed,
  status = status_settled,
  group = group_settled,
}, 'release')
if unknown then
  return unknown
end
-- The released job is now the earliest one: wake an idle worker to re-arm its timer.
if redis.call('zrank', KEYS[2], member) == 0 then
  redis.call('rpush', KEYS[3], '1')
end
return 1
