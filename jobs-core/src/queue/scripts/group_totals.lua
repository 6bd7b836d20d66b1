-- group_totals: how many groups of a queue have jobs, and their ready, delayed and reserved
-- jobs in all, read in one step: the groups in the rotation, the blocked set and the due set
-- (lib/groups.lua says why every group with jobs is in one of them). It costs Redis time in
-- proportion to those groups.
-- KEYS[1]  queues:<name>:groups:rotating
-- KEYS[2]  queues:<name>:groups:blocked
-- KEYS[3]  queues:<name>:groups:due
-- ARGV[1]  queues:<name>:g:   what a group's name follows in its keys
-- Returns { groups, ready, delayed, reserved }.
local seen = {}
local totals = { 0, 0, 0, 0 }
local function count(group)
  if seen[group] then return end
  seen[group] = true
  local list = ARGV[1] .. group
  local ready = redis.call('llen', list)
  local delayed = redis.call('zcard', list .. ':delayed')
  local reserved = redis.call('zcard', list .. ':reserved')
  if ready + delayed + reserved > 0 then totals[1] = totals[1] + 1 end
  totals[2] = totals[2] + ready
  totals[3] = totals[3] + delayed
  totals[4] = totals[4] + reserved
end
for _, group in ipairs(redis.call('smembers', KEYS[1])) do count(group) end
for _, group in ipairs(redis.call('zrange', KEYS[2], 0, -1)) do count(group) end
for _, group in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do count(group) end
return totals
