-- group_sizes: groups of a queue with jobs, at most ARGV[2] of them (lib/group_scan.lua), and
-- for each its ready, delayed and running jobs, its limits, and where it is (rotating,
-- blocked until a time, or idle), read in one step.
-- KEYS[1]  queues:<name>:groups             the rotation
-- KEYS[2]  queues:<name>:groups:rotating
-- KEYS[3]  queues:<name>:groups:blocked
-- KEYS[4]  queues:<name>:groups:due
-- KEYS[5]  queues:<name>:groups:limits
-- ARGV[1]  queues:<name>:g:   what a group's name follows in its keys
-- ARGV[2]  the most groups to read
-- Returns { {group, ready, delayed, running, concurrency, rate, paused, blocked until ('' when
-- not blocked; 'inf' when paused), rotating (1 or 0), weight}, ... }, and 1 when more groups
-- were left unread (else 0); the limits and the weight '' when the group has none of its own.
local groups, more = groups_to_read(KEYS[1], KEYS[3], KEYS[4], tonumber(ARGV[2]))
local out = {}
for _, group in ipairs(groups) do
  local list = ARGV[1] .. group
  local ready = redis.call('llen', list)
  local delayed = redis.call('zcard', list .. ':delayed')
  local running = redis.call('zcard', list .. ':reserved')
  if ready + delayed + running > 0 then
    local limits = redis.call('hmget', KEYS[5], group .. ':c', group .. ':r', group .. ':p',
      group .. ':w')
    out[#out + 1] = {
      group, ready, delayed, running,
      limits[1] or '',
      limits[2] or '',
      limits[3] and 1 or 0,
      redis.call('zscore', KEYS[3], group) or '',
      redis.call('sismember', KEYS[2], group),
      limits[4] or '',
    }
  end
end
return { out, more and 1 or 0 }
