-- complete_batch: acknowledge finished jobs of one batch and one queue, and count each in the
-- batch, in one step: each job is counted only if its reservation was still held, and the
-- batch's callbacks are pushed once the last is counted. The worker's acker sends the jobs of
-- a batch that finished meanwhile together, as it deletes plain jobs' reservations together;
-- each set is changed by one call for all of them.
-- KEYS[1]     queues:<name>:reserved
-- KEYS[2..11] the batch's keys and its callbacks' routes (batch_from in lib/batch.lua)
-- ARGV[1..4]  batch_from's: the callbacks' due times, how long to keep the finished batch
-- ARGV[5..]   n reserved copies, byte for byte as pop returned them, then their jobs' n uuids
--             in the same order (a copy given twice counts once)
-- Returns how many reservations were still held.
local at = effects_from(2, 1)
local batch = batch_from(at)
-- The copies and uuids are handed to each call as ranges of ARGV: a script's own list of
-- them would be a second copy of every payload, and this call carries a hundred at a time.
local first = at.arg
local n = (#ARGV - first + 1) / 2
local scores = redis.call('zmscore', KEYS[1], unpack(ARGV, first, first + n - 1))
local held_uuids = {}
for i = 1, n do
  if scores[i] then
    held_uuids[#held_uuids + 1] = ARGV[first + n + i - 1]
  end
end
if #held_uuids == 0 then
  return 0
end
if redis.call('exists', batch.record) == 1 then
  batch_count_all_done(batch, held_uuids)
  batch_check(batch)
end
-- ZREM counts a copy given twice once, and one no longer held not at all.
return redis.call('zrem', KEYS[1], unpack(ARGV, first, first + n - 1))
