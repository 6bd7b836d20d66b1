-- track: start the status record of a tracked job as it is pushed, unless it has one already
-- (a worker may have reserved it first).
-- KEYS[1]  jobs:status:<uuid>
-- ARGV[1]  its state: 'queued' or 'delayed'
-- ARGV[2]  the queue's name
-- ARGV[3]  the job's name
-- ARGV[4]  how long to keep the record, in ms: until the job is due, and a day more
-- Returns 1 when the record was made, 0 when there was one.
return start_status(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
