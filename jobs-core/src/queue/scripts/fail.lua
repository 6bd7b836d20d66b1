-- fail: record a job in the failed-job store, removing its reservation, and prune the store.
-- KEYS[1]  failed_jobs         hash: uuid -> failed-job record (JSON)
-- KEYS[2]  failed_jobs:index   set: uuid, score = failed_at (seconds, with microseconds, so
--                               that failures within one second keep their order)
-- KEYS[3]  failed_jobs:hooks   set: uuid of a job whose failed() hook is still to finish,
--                               score = when a worker may run it (again)
-- KEYS[4]  queues:<name>:reserved, optional. When given, the reservation ARGV[1] is removed
--          in the same call, and nothing is recorded unless it was still held. On a Redis
--          Cluster this set lives in another slot than the failed-job store, so the caller
--          leaves it out: it checks the reservation before and removes it after this call.
-- KEYS[5..] the keys of the effects, in turn (lib/effects.lua); only with KEYS[4] (on a
--          cluster the caller applies them in calls of their own)
-- ARGV[1]  the reserved copy as pop returned it, or '' for a job that was never reserved (or
--          whose reservation the caller handles)
-- ARGV[2]  the job's uuid
-- ARGV[3]  the failed-job record
-- ARGV[4]  how many failed jobs to keep at most
-- ARGV[5]  how long to keep failed jobs, in seconds
-- ARGV[6]  '' for a job without a failed() hook; else the seconds after which another worker
--          runs its hook, should the one failing it not report it done by then
-- ARGV[7..] the effects, each its name and its arguments, applied in turn by apply_effects
--          (lib/effects.lua):
--          'holds'  free what the job held (lib/holds.lua)
--          'chain'  push the chain's catch job (lib/chain.lua)
--          'batch'  count the job failed in its batch (lib/batch.lua)
--          'status'  record its outcome in its status and its queue's events (lib/status.lua)
--          'group'  a job of a group ended: its group comes back (lib/groups.lua)
--          'checkpoint'  delete a resumable job's checkpoint (lib/checkpoint.lua)
-- Returns 1 when recorded, 0 when the reservation is no longer held: then nothing changes.
-- The hook is owed in the same step as the record, so it is never skipped: the worker that
-- failed the job runs it and removes the entry; if it dies first, another one runs it.
if KEYS[4] and ARGV[1] ~= '' and redis.call('zrem', KEYS[4], ARGV[1]) == 0 then
  return 0
end
local unknown = apply_effects(effects_from(5, 7), {
  holds = holds_freed,
  chain = chain_failed,
  batch = batch_failed,
  status = status_settled,
  group = group_settled,
  checkpoint = checkpoint_forgotten,
}, 'fail')
if unknown then
  return unknown
end
local now = now_seconds_precise()
redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
redis.call('zadd', KEYS[2], now, ARGV[2])
if ARGV[6] ~= '' then
  redis.call('zadd', KEYS[3], now + tonumber(ARGV[6]), ARGV[2])
end

-- Pruning is bounded per call; every failure prunes a little more.
forget_failed_before(KEYS[1], KEYS[2], now - tonumber(ARGV[5]), 1000)
local excess = redis.call('zcard', KEYS[2]) - tonumber(ARGV[4])
if excess > 0 then
  local oldest = redis.call('zrange', KEYS[2], 0, math.min(excess, 1000) - 1)
  redis.call('hdel', KEYS[1], unpack(oldest))
  redis.call('zremrangebyrank', KEYS[2], 0, #oldest - 1)
end
return 1
