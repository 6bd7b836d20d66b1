-- group_touch: bring groups that jobs were just pushed into into the rotation, or into the due
-- set for their delayed jobs (lib/groups.lua). Sent after the pushes, in the same pipeline.
-- KEYS[1]  queues:<name>:groups             the rotation
-- KEYS[2]  queues:<name>:groups:rotating    the groups in it
-- KEYS[3]  queues:<name>:groups:blocked     groups that may not run a job yet
-- KEYS[4]  queues:<name>:groups:due         groups with delayed or reserved jobs
-- KEYS[5]  queues:<name>:notify             wake-up tokens: one for each group that enters
-- ARGV[1]  queues:<name>:g:   what a group's name follows in its keys
-- ARGV[2..] the groups
-- Returns how many groups entered the rotation.
local gk = groups_keys(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1])
local entered = 0
for i = 2, #ARGV do
  group_due(gk, ARGV[i])
  if group_enter(gk, ARGV[i]) then entered = entered + 1 end
end
return entered
