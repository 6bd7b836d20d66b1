-- push: append ready jobs to a queue, one wake-up token per job.
-- KEYS[1]  queues:<name>          ready list
-- KEYS[2]  queues:<name>:notify   wake-up tokens
-- ARGV     one or more payloads, in order
-- Returns the ready list's length after the push.
return push_ready_jobs(KEYS[1], KEYS[2], ARGV)
