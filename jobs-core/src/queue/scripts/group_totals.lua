-- group_totals: how many groups of a queue have jobs, and their ready, delayed and reserved
-- jobs in all, read in one step from at most ARGV[2] groups (lib/group_scan.lua): in the
-- rotation, blocked, or due (lib/groups.lua says why every group with jobs is in one of them).
-- KEYS[1]  queues:<name>:groups             the rotation
-- KEYS[2]  queues:<name>:groups:blocked
-- KEYS[3]  queues:<name>:groups:due
-- ARGV[1]  queues:<name>:g:   what a group's name follows in its keys
-- ARGV[2]  the most groups to read
-- Returns { groups with jobs, ready, delayed, reserved, 1 when more groups were left unread }.
local groups, more = groups_to_read(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[2]))
local totals = { 0, 0, 0, 0, more and 1 or 0 }
for _, group in ipairs(groups) do
  local list = ARGV[1] .. group
  local ready = redis.call('llen', list)
  local delayed = redis.call('zcard', list .. ':delayed')
  local reserved = redis.call('zcard', list .. ':reserved')
  if ready + delayed + reserved > 0 then totals[1] = totals[1] + 1 end
  totals[2] = totals[2] + ready
  totals[3] = totals[3] + delayed
  totals[4] = totals[4] + reserved
end
return totals
