-- ack: acknowledge finished jobs of one queue whose events are on, appending the `completed`
-- events of those whose reservations were still held, as one entry, in the same step.
-- KEYS[1]  queues:<name>:reserved
-- KEYS[2]  queues:<name>:events
-- ARGV[1]  the events stream's length
-- ARGV[2]  the jobs' uuids, joined by spaces, as the worker knows them; '' to read them from
--          the payloads
-- ARGV[3]  their names, joined by newlines (with ARGV[2])
-- ARGV[4]  their attempts, joined by spaces (with ARGV[2])
-- ARGV[5..] reserved copies, byte for byte as pop returned them (at most 1000), in the order
--          of ARGV[2..4]
-- Returns how many were still held.
local copies = {}
for i = 5, #ARGV do copies[i - 4] = ARGV[i] end
local held = {}
local uuids, jobs, attempts = {}, {}, {}
for i, score in ipairs(redis.call('zmscore', KEYS[1], unpack(copies))) do
  if score then held[#held + 1] = copies[i] end
end
if #held == 0 then
  return 0
end
if ARGV[2] ~= '' and #held == #copies then
  -- Every job is still held, the common case: the worker's lists are the event as it is.
  redis.call('xadd', KEYS[2], 'maxlen', '~', ARGV[1], '*', 'event', 'completed', 'n', #held,
    'uuid', ARGV[2], 'job', ARGV[3], 'attempt', ARGV[4])
else
  for _, job in ipairs(held) do
    uuids[#uuids + 1] = payload_uuid(job)
    jobs[#jobs + 1] = payload_job(job)
    local attempt = payload_attempts(job)
    if attempt == '' then attempt = '0' end
    attempts[#attempts + 1] = attempt
  end
  status_events(KEYS[2], ARGV[1], 'completed', uuids, jobs, attempts)
end
-- ZREM counts a copy given twice once.
return redis.call('zrem', KEYS[1], unpack(held))
