-- push_unique_once: push a unique job built ahead of time (an outbox row) unless it was pushed
-- already: take its lock and push it in one step, or push nothing when another job holds the
-- lock. A job pushed before (its guard is set) counts as pushed, whoever holds the lock now.
-- KEYS[1]  the lock: jobs:unique:<job>:<unique id> (on a cluster, under the queue's tag)
-- KEYS[2]  queues:<name> when ARGV[4] is '', else queues:<name>:delayed
-- KEYS[3]  queues:<name>:notify
-- KEYS[4]  queues:<name>:pushed:<uuid>, the guard of the job's uuid
-- ARGV[1]  the job's uuid: the lock's value
-- ARGV[2]  how long the lock lasts at most, in milliseconds
-- ARGV[3]  the payload
-- ARGV[4]  '' to push the job ready, else its due time as later.lua takes it
-- ARGV[5]  how long the guard lasts, in seconds
-- ARGV[6]  the job's group ('' none): KEYS[2] is then the group's list or delayed set
-- KEYS[5]  for a tracked job whose status record starts with its push (on one server):
--          jobs:status:<uuid>; else absent
-- ARGV[7..10]  then the record's state, queue, job and lifetime in ms, as track.lua takes them
-- Returns '' when pushed now or before, else the uuid of the job that holds the lock.
if redis.call('exists', KEYS[4]) == 1 then
  return ''
end
local group = ARGV[6] ~= '' and ARGV[6] or nil
local holder = push_unique_job(KEYS[1], ARGV[1], ARGV[2], KEYS[2], KEYS[3], ARGV[4], ARGV[3],
  group)
if holder and holder ~= ARGV[1] then
  return holder
end
-- Pushed now, or held by this very job: pushed before, by a pass whose guard has lapsed.
redis.call('set', KEYS[4], '1', 'ex', tonumber(ARGV[5]))
if KEYS[5] then
  start_status(KEYS[5], ARGV[7], ARGV[8], ARGV[9], ARGV[10])
end
return ''
