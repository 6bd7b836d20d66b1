-- group_push: push jobs into one group of a queue, ready or delayed, and bring the group into
-- the rotation, or score it in the due set by its delayed jobs (lib/groups.lua), in the same
-- step: no pop finds the group's jobs before the group can be served.
-- KEYS[1]  queues:<name>:groups             the rotation
-- KEYS[2]  queues:<name>:groups:rotating    the groups in it
-- KEYS[3]  queues:<name>:groups:blocked     groups that may not run a job yet
-- KEYS[4]  queues:<name>:groups:due         groups with delayed or reserved jobs
-- KEYS[5]  queues:<name>:notify             wake-up tokens
-- KEYS[6]  queues:<name>:g:<group>, or its :delayed set when ARGV[3] is 'delayed'
-- ARGV[1]  queues:<name>:g:   what a group's name follows in its keys
-- ARGV[2]  the group
-- ARGV[3]  'ready' or 'delayed'
-- ARGV[4..] the payloads, in order; delayed ones each after its due time, as later.lua takes
--          them
-- Returns how many jobs were pushed.
--
-- Ready jobs wake a worker through the group: a group entering the rotation pushes one token
-- (the pop keeps one per rotating group), and one already in it has a token or a worker.
local gk = groups_keys(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1])
local group = ARGV[2]
if ARGV[3] == 'delayed' then
  local scheduled = schedule_jobs(KEYS[6], KEYS[5], ARGV, 4)
  group_due(gk, group)
  return scheduled
end
-- Its delayed jobs and reservations are as they were, and so is its place in the due set.
rpush_chunked(KEYS[6], ARGV, 4, #ARGV)
group_enter(gk, group)
return #ARGV - 3
