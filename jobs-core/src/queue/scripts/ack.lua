-- ack: acknowledge finished jobs of one queue whose events are on, appending a `completed`
-- event for each reservation still held, in the same step.
-- KEYS[1]  queues:<name>:reserved
-- KEYS[2]  queues:<name>:events
-- ARGV[1]  the events stream's length
-- ARGV[2..] reserved copies, byte for byte as pop returned them (at most 1000)
-- Returns how many were still held.
local held = 0
for i = 2, #ARGV do
  local job = ARGV[i]
  if redis.call('zrem', KEYS[1], job) == 1 then
    held = held + 1
    status_event(KEYS[2], ARGV[1], 'completed', payload_uuid(job), payload_job(job),
      payload_attempts(job), '')
  end
end
return held
