-- complete_batch: the last step of acknowledging finished jobs of one batch and one queue
-- together. The acker sends it in a MULTI after the native commands that count the jobs and
-- delete their reservations (`SREM` of their uuids from the batch's pending set, `ZREM` of
-- them from its failed set, `ZREM` of their reserved copies), so the copies are never handed
-- to Lua, which costs a script more than the commands themselves. This script then takes the
-- batch's step: its counts from its sets, and its callbacks pushed once the last job is
-- counted (batch_check in lib/batch.lua).
-- KEYS[1..10] the batch's keys and its callbacks' routes (batch_from in lib/batch.lua)
-- ARGV[1..4]  batch_from's: the callbacks' due times, how long to keep the finished batch
-- Returns 1, or 0 when the batch's record is gone (pruned).
local batch = batch_from(effects_from(1, 1))
if redis.call('exists', batch.record) == 0 then
  return 0
end
batch_check(batch)
return 1
