-- schedule_fire: claim a schedule's tick and push its job, in one step, so that a tick is
-- never claimed without its job and any number of workers fire it once.
-- KEYS[1]  jobs:schedule:<name>   hash: last_tick (Unix ms of the last tick fired), last_uuid,
--          last_outcome (pushed, skipped), fired_at (Unix ms, Redis's clock), when
-- KEYS[2]  the job's queue's ready list, or its group's
-- KEYS[3]  the job's queue's notify
-- KEYS[4]  the schedule's overlap lock (its job's unique lock), or any key when unguarded
-- ARGV[1]  the tick's nominal time, Unix ms
-- ARGV[2]  the job's payload
-- ARGV[3]  the job's uuid
-- ARGV[4]  how the schedule is written, for operators
-- ARGV[5]  '' when unguarded, else how long the overlap lock lasts at most, in ms
-- ARGV[6]  the job's group ('' none), which the push brings into the rotation
-- Returns 1 when pushed, 2 when the tick was claimed but skipped (the job of an earlier tick
-- holds the overlap lock), 0 when this tick, or a later one, was fired already.
local last = tonumber(redis.call('hget', KEYS[1], 'last_tick') or '-1')
if last >= tonumber(ARGV[1]) then
  return 0
end
local outcome = 'pushed'
if ARGV[5] ~= '' and not redis.call('set', KEYS[4], ARGV[3], 'nx', 'px', tonumber(ARGV[5])) then
  outcome = 'skipped'
else
  push_job(KEYS[2], KEYS[3], '', ARGV[2], ARGV[6] ~= '' and ARGV[6] or nil)
end
redis.call('hset', KEYS[1], 'last_tick', ARGV[1], 'last_uuid', ARGV[3], 'last_outcome', outcome,
  'fired_at', now_millis(), 'when', ARGV[4])
if outcome == 'pushed' then
  return 1
end
return 2
