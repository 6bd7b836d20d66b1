-- group_ended: bring groups whose jobs just ended back into the rotation, each that is blocked
-- and not paused (lib/groups.lua), with a wake-up token. The acker calls it after removing
-- the jobs' reservations, for the groups that were blocked then.
-- KEYS[1]  queues:<name>:groups             the rotation
-- KEYS[2]  queues:<name>:groups:rotating    the groups in it
-- KEYS[3]  queues:<name>:groups:blocked     groups that may not run a job yet
-- KEYS[4]  queues:<name>:groups:due         groups with delayed or reserved jobs
-- KEYS[5]  queues:<name>:notify             wake-up tokens: one for each group that comes back
-- ARGV[1]  queues:<name>:g:   what a group's name follows in its keys
-- ARGV[2..] the groups
local gk = groups_keys(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1])
for i = 2, #ARGV do
  group_ended(gk, ARGV[i])
end
return 0
