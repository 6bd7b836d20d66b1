-- event: append events of jobs to a queue's events stream, kept at about a length.
-- KEYS[1]  queues:<name>:events
-- ARGV[1]  the stream's length ('~': trimmed by whole nodes)
-- ARGV[2..] groups of five: the event, the job's uuid, its name, its attempt, data ('' for none)
-- Returns how many were appended.
for i = 2, #ARGV, 5 do
  status_event(KEYS[1], ARGV[1], ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4])
end
return (#ARGV - 1) / 5
