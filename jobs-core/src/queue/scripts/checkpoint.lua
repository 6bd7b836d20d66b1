-- checkpoint: save a running job's checkpoint in the step that extends its reservation, and
-- only while the reservation is held: a checkpoint never precedes nor outlives its attempt.
-- KEYS[1]  queues:<name>:reserved (or a group's)
-- KEYS[2]  the job's checkpoint key
-- ARGV[1]  the reserved copy, byte for byte as pop returned it
-- ARGV[2]  retry_after in seconds (may have a fraction): the new expiry is server time + this
-- ARGV[3]  the checkpoint (JSON)
-- ARGV[4]  how long the checkpoint is kept, in seconds, should the job never settle
-- Returns 1 when saved, 0 when the reservation is no longer held: then nothing changes.
if not redis.call('zscore', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('zadd', KEYS[1], 'XX', now_seconds() + tonumber(ARGV[2]), ARGV[1])
redis.call('set', KEYS[2], ARGV[3], 'EX', ARGV[4])
return 1
