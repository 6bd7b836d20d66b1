-- group_ack: acknowledge finished jobs of one group, bring the group back into the rotation
-- if it was blocked at its concurrency limit (lib/groups.lua), and append the jobs'
-- `completed` event when the queue's events are on, in one step.
-- KEYS[1]  queues:<name>:g:<group>:reserved
-- KEYS[2]  queues:<name>:groups             the rotation
-- KEYS[3]  queues:<name>:groups:rotating    the groups in it
-- KEYS[4]  queues:<name>:groups:blocked     groups that may not run a job yet
-- KEYS[5]  queues:<name>:groups:due         groups with delayed or reserved jobs
-- KEYS[6]  queues:<name>:events             the queue's events stream
-- ARGV[1]  queues:<name>:g:   what a group's name follows in its keys
-- ARGV[2]  the group
-- ARGV[3]  the events stream's length ('0': no event)
-- ARGV[4]  the jobs' uuids, joined by spaces (with ARGV[3])
-- ARGV[5]  their names, joined by newlines
-- ARGV[6]  their attempts, joined by spaces
-- ARGV[7..] reserved copies, byte for byte as pop returned them (at most 1000)
-- Returns how many were still held. The event names every attempt given, held or not, as
-- the queue's own acknowledgement does (docs/status.md).
local copies = {}
for i = 7, #ARGV do copies[i - 6] = ARGV[i] end
local held = redis.call('zrem', KEYS[1], unpack(copies))
if held > 0 then
  group_ended(groups_keys(KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1]), ARGV[2])
end
if ARGV[3] ~= '0' then
  redis.call('xadd', KEYS[6], 'maxlen', '~', ARGV[3], '*', 'event', 'completed', 'n', #copies,
    'uuid', ARGV[4], 'job', ARGV[5], 'attempt', ARGV[6])
end
return held
