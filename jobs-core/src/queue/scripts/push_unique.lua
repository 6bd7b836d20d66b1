-- push_unique: take a unique job's lock and push the job in one step, or push nothing when
-- another job holds the lock, so that a lock never exists without its job.
-- KEYS[1]  the lock: jobs:unique:<job>:<unique id> (on a cluster, under the queue's tag)
-- KEYS[2]  queues:<name> when ARGV[4] is '', else queues:<name>:delayed
-- KEYS[3]  queues:<name>:notify
-- ARGV[1]  the job's uuid: the lock's value
-- ARGV[2]  how long the lock lasts at most, in milliseconds
-- ARGV[3]  the payload
-- ARGV[4]  '' to push the job ready, else its due time as later.lua takes it
-- ARGV[5]  the job's group, if it has one: KEYS[2] is then the group's list or delayed set,
--          and the group is scored due, so that the next pop brings it into the rotation
-- Returns '' when pushed, else the uuid of the job that holds the lock.
return push_unique_job(KEYS[1], ARGV[1], ARGV[2], KEYS[2], KEYS[3], ARGV[4], ARGV[3],
  ARGV[5]) or ''
