-- group_ack: acknowledge finished jobs of a queue's groups, bring each group of them that was
-- blocked back into the rotation (lib/groups.lua), and append the jobs' `completed` event
-- when the queue's events are on, in one step.
-- KEYS[1]  queues:<name>:groups             the rotation
-- KEYS[2]  queues:<name>:groups:rotating    the groups in it
-- KEYS[3]  queues:<name>:groups:blocked     groups that may not run a job yet
-- KEYS[4]  queues:<name>:groups:due         groups with delayed or reserved jobs
-- KEYS[5]  queues:<name>:notify             wake-up tokens: one for each group that comes back
-- KEYS[6]  queues:<name>:events             the queue's events stream
-- ARGV[1]  queues:<name>:g:   what a group's name follows in its keys
-- ARGV[2]  the events stream's length ('0': no event)
-- ARGV[3]  the jobs' uuids, joined by spaces (with ARGV[2])
-- ARGV[4]  their names, joined by newlines
-- ARGV[5]  their attempts, joined by spaces
-- ARGV[6..] pairs: a job's group, and its reserved copy byte for byte as pop returned it (at
--          most 1000 pairs)
-- Returns how many were still held. The event names every attempt given, held or not, as
-- the queue's own acknowledgement does (docs/status.md).
local gk = groups_keys(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1])
local held = 0
local ended = {}
local groups = {}
for i = 6, #ARGV, 2 do
  local group = ARGV[i]
  if redis.call('zrem', gk.prefix .. group .. ':reserved', ARGV[i + 1]) == 1 then
    held = held + 1
    if not ended[group] then
      ended[group] = true
      groups[#groups + 1] = group
    end
  end
end
for _, group in ipairs(groups) do
  group_ended(gk, group)
end
if ARGV[2] ~= '0' then
  redis.call('xadd', KEYS[6], 'maxlen', '~', ARGV[2], '*', 'event', 'completed',
    'n', (#ARGV - 5) / 2, 'uuid', ARGV[3], 'job', ARGV[4], 'attempt', ARGV[5])
end
return held
