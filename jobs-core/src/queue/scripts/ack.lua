-- ack: acknowledge finished jobs of one queue whose events are on, appending the `completed`
-- events of those whose reservations were still held, as one entry, in the same step.
-- KEYS[1]  queues:<name>:reserved
-- KEYS[2]  queues:<name>:events
-- ARGV[1]  the events stream's length
-- ARGV[2..] reserved copies, byte for byte as pop returned them (at most 1000)
-- Returns how many were still held.
local copies = {}
for i = 2, #ARGV do copies[i - 1] = ARGV[i] end
local held = {}
local uuids, jobs, attempts = {}, {}, {}
for i, score in ipairs(redis.call('zmscore', KEYS[1], unpack(copies))) do
  if score then
    local job = copies[i]
    held[#held + 1] = job
    uuids[#uuids + 1] = payload_uuid(job)
    jobs[#jobs + 1] = payload_job(job)
    local attempt = payload_attempts(job)
    if attempt == '' then attempt = '0' end
    attempts[#attempts + 1] = attempt
  end
end
if #held == 0 then
  return 0
end
status_events(KEYS[2], ARGV[1], 'completed', uuids, jobs, attempts)
-- ZREM counts a copy given twice once.
return redis.call('zrem', KEYS[1], unpack(held))
