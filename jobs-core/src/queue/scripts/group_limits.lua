-- group_limits: set or clear limits of one group of a queue, or of all its groups ('*'), and
-- bring a group that was blocked back into the rotation so that it is held to them at its
-- next turn (lib/groups.lua). A paused group is blocked until it is resumed.
-- KEYS[1]  queues:<name>:groups             the rotation
-- KEYS[2]  queues:<name>:groups:rotating    the groups in it
-- KEYS[3]  queues:<name>:groups:blocked     groups that may not run a job yet
-- KEYS[4]  queues:<name>:groups:due         groups with delayed or reserved jobs
-- KEYS[5]  queues:<name>:groups:limits      the groups' limits
-- KEYS[6]  queues:<name>:notify             wake-up tokens: one for a group that comes back
-- ARGV[1]  queues:<name>:g:   what a group's name follows in its keys
-- ARGV[2]  the group, or '*' for every group of the queue
-- ARGV[3..] pairs: a limit ('c' concurrency, 'r' rate, 'p' paused, 'w' weight) and its value
--          ('': none); a group's weight set or cleared starts its next turn afresh
-- Returns 1.
local gk = groups_keys(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], ARGV[1])
local group = ARGV[2]
for i = 3, #ARGV, 2 do
  local field = group .. ':' .. ARGV[i]
  if ARGV[i + 1] == '' then
    redis.call('hdel', KEYS[5], field)
  else
    redis.call('hset', KEYS[5], field, ARGV[i + 1])
  end
  if ARGV[i] == 'w' then
    redis.call('hdel', KEYS[5], group .. ':s')
  end
end
if group ~= '*' and not redis.call('hget', KEYS[5], group .. ':p') then
  if redis.call('zscore', gk.blocked, group) then
    redis.call('zrem', gk.blocked, group)
    group_enter(gk, group)
  end
end
return 1
