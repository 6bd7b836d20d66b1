-- group_sizes: the groups of a queue with jobs, and for each its ready, delayed and running
-- jobs, its limits, and where it is (rotating, blocked until a time, or idle), read in one
-- step. The groups are those in the rotation, the blocked set and the due set.
-- KEYS[1]  queues:<name>:groups:rotating
-- KEYS[2]  queues:<name>:groups:blocked
-- KEYS[3]  queues:<name>:groups:due
-- KEYS[4]  queues:<name>:groups:limits
-- ARGV[1]  queues:<name>:g:   what a group's name follows in its keys
-- Returns one entry per group: { group, ready, delayed, running, concurrency, rate, paused,
-- blocked until ('' when not blocked; 'inf' when paused), rotating (1 or 0) }, the limits ''
-- when the group has none of its own.
local seen = {}
local groups = {}
local function add(group)
  if not seen[group] then
    seen[group] = true
    groups[#groups + 1] = group
  end
end
for _, group in ipairs(redis.call('smembers', KEYS[1])) do add(group) end
for _, group in ipairs(redis.call('zrange', KEYS[2], 0, -1)) do add(group) end
for _, group in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do add(group) end
local out = {}
for i, group in ipairs(groups) do
  local list = ARGV[1] .. group
  local limits = redis.call('hmget', KEYS[4], group .. ':c', group .. ':r', group .. ':p')
  out[i] = {
    group,
    redis.call('llen', list),
    redis.call('zcard', list .. ':delayed'),
    redis.call('zcard', list .. ':reserved'),
    limits[1] or '',
    limits[2] or '',
    limits[3] and 1 or 0,
    redis.call('zscore', KEYS[2], group) or '',
    redis.call('sismember', KEYS[1], group),
  }
end
return out
