-- complete_batch: acknowledge finished jobs of one batch and one queue, and count each in the
-- batch, in one step: each job is counted only if its reservation was still held, and the
-- batch's callbacks are pushed once the last is counted. The worker's acker sends the jobs of
-- a batch that finished meanwhile together, as it deletes plain jobs' reservations together.
-- KEYS[1]     queues:<name>:reserved
-- KEYS[2..11] the batch's keys and its callbacks' routes (batch_from in lib/batch.lua)
-- ARGV[1..4]  batch_from's: the callbacks' due times, how long to keep the finished batch
-- ARGV[5..]   pairs: a reserved copy, byte for byte as pop returned it, and its job's uuid
-- Returns how many reservations were still held.
local at = effects_from(2, 1)
local batch = batch_from(at)
local counting = redis.call('exists', batch.record) == 1
local acknowledged = 0
for i = at.arg, #ARGV, 2 do
  if redis.call('zrem', KEYS[1], ARGV[i]) == 1 then
    acknowledged = acknowledged + 1
    if counting then
      batch_count_done(batch, ARGV[i + 1])
    end
  end
end
if counting then
  batch_check(batch)
end
return acknowledged
