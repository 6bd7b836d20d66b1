-- push_unique: take a unique job's lock and push the job in one step, or push nothing when
-- another job holds the lock, so that a lock never exists without its job.
-- KEYS[1]  the lock: jobs:unique:<job>:<unique id> (on a cluster, under the queue's tag)
-- KEYS[2]  queues:<name> when ARGV[4] is '', else queues:<name>:delayed
-- KEYS[3]  queues:<name>:notify
-- ARGV[1]  the job's uuid: the lock's value
-- ARGV[2]  how long the lock lasts at most, in milliseconds
-- ARGV[3]  the payload
-- ARGV[4]  '' to push the job ready, else its due time as later.lua takes it
-- Returns '' when pushed, else the uuid of the job that holds the lock.
-- One command takes a free lock or reads the holder of a taken one.
local holder = redis.call('set', KEYS[1], ARGV[1], 'nx', 'get', 'px', tonumber(ARGV[2]))
if holder then
  return holder
end
push_job(KEYS[2], KEYS[3], ARGV[4], ARGV[3])
return ''
