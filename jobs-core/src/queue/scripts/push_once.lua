-- push_once: push a job built ahead of time (a chain's next link, a catch job, a batch's
-- callback) unless it was pushed already: on a Redis Cluster a workflow's step and the push it
-- causes are in different slots, and a step taken again after a crash pushes again.
-- KEYS[1]  the queue's ready list, or its delayed set when ARGV[1] is a due time
-- KEYS[2]  the queue's notify
-- KEYS[3]  queues:<name>:pushed:<uuid>, the guard of the job's uuid
-- ARGV[1]  the due time as later.lua takes it, or '' to push the job ready
-- ARGV[2]  the job's link (lib/push_job.lua)
-- ARGV[3]  how long the guard lasts, in seconds
-- KEYS[4]  for a tracked job whose status record starts with its push (an outbox relay's, on
--          one server): jobs:status:<uuid>; else absent
-- ARGV[4..7]  then the record's state, queue, job and lifetime in ms, as track.lua takes them
-- Returns 1 when pushed, 0 when it had been.
if redis.call('exists', KEYS[3]) == 1 then
  return 0
end
-- The push first: a push Redis refuses (a key of another type) leaves no guard behind.
push_link(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
redis.call('set', KEYS[3], '1', 'ex', tonumber(ARGV[3]))
if KEYS[4] then
  start_status(KEYS[4], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
end
return 1
