-- complete_batch: acknowledge finished jobs of one batch and one queue, and count each in the
-- batch, in one step: each job is counted only if its reservation was still held, and the
-- batch's callbacks are pushed once the last is counted. The worker's acker sends the jobs of
-- a batch that finished meanwhile together, as it deletes plain jobs' reservations together;
-- each set is changed by one call for all of them.
-- KEYS[1]     queues:<name>:reserved
-- KEYS[2..11] the batch's keys and its callbacks' routes (batch_from in lib/batch.lua)
-- ARGV[1..4]  batch_from's: the callbacks' due times, how long to keep the finished batch
-- ARGV[5..]   pairs: a reserved copy, byte for byte as pop returned it, and its job's uuid
--             (a copy given twice counts once)
-- Returns how many reservations were still held.
local at = effects_from(2, 1)
local batch = batch_from(at)
local copies, uuids = {}, {}
for i = at.arg, #ARGV, 2 do
  copies[#copies + 1] = ARGV[i]
  uuids[#uuids + 1] = ARGV[i + 1]
end
local held_copies, held_uuids = {}, {}
for i, score in ipairs(redis.call('zmscore', KEYS[1], unpack(copies))) do
  if score then
    held_copies[#held_copies + 1] = copies[i]
    held_uuids[#held_uuids + 1] = uuids[i]
  end
end
if #held_copies == 0 then
  return 0
end
if redis.call('exists', batch.record) == 1 then
  batch_count_all_done(batch, held_uuids)
  batch_check(batch)
end
-- ZREM counts a copy given twice once.
return redis.call('zrem', KEYS[1], unpack(held_copies))
