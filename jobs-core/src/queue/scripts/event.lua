-- event: append one event of many jobs to a queue's events stream, as one entry.
-- KEYS[1]  queues:<name>:events
-- ARGV[1]  the stream's length ('~': trimmed by whole nodes)
-- ARGV[2]  the event
-- ARGV[3..] triples: a job's uuid, its name, its attempt
-- Returns how many jobs.
local uuids, jobs, attempts = {}, {}, {}
for i = 3, #ARGV, 3 do
  uuids[#uuids + 1] = ARGV[i]
  jobs[#jobs + 1] = ARGV[i + 1]
  attempts[#attempts + 1] = ARGV[i + 2]
end
status_events(KEYS[1], ARGV[1], ARGV[2], uuids, jobs, attempts)
return #uuids
