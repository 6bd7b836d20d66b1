-- complete_batch: the last step of acknowledging finished jobs of one batch and one queue
-- together. The acker sends it in a MULTI after the native commands that count the jobs and
-- delete their reservations (`SREM` of their uuids from the batch's pending set, `ZREM` of
-- them from its failed set, `ZREM` of their reserved copies), so the copies are never handed
-- to Lua, which costs a script more than the commands themselves. This script then takes the
-- batch's step: its callbacks pushed once the last job is counted (batch_check in
-- lib/batch.lua).
-- KEYS[1..10] the batch's keys and its callbacks' routes (batch_from in lib/batch.lua)
-- ARGV[1..4]  batch_from's: the callbacks' due times, how long to keep the finished batch
-- Returns 1, or 0 when the batch's record is gone (pruned).

-- While jobs are pending, nothing is left to do. Most calls end here, before the libraries
-- are defined: defining them and reading the keys cost three times this call (docs/
-- benchmarks.md).
if redis.call('scard', KEYS[2]) > 0 then
  return 1
end
-- @libraries
local batch = batch_from(effects_from(1, 1))
if redis.call('exists', batch.record) == 0 then
  return 0
end
batch_check(batch)
return 1
