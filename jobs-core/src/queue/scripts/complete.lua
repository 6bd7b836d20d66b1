-- complete: acknowledge a finished job and apply what finishing it changes, in one step and
-- only if its reservation was still held (rule: a side effect of finishing a job happens in the
-- same atomic step as its acknowledgement).
-- KEYS[1]  queues:<name>:reserved
-- KEYS[2..] the keys of the effects, in turn (lib/effects.lua)
-- ARGV[1]  the reserved copy, byte for byte as pop returned it
-- ARGV[2..] the effects, each its name and its arguments, applied in turn by apply_effects
--          (lib/effects.lua):
--          'holds'  free what the job held (lib/holds.lua)
--          'chain'  push the chain's next link (lib/chain.lua)
--          'batch'  count the job done in its batch, with the jobs it added (lib/batch.lua)
--          'batch_start'  start the batch the chain reached (lib/batch.lua)
--          'status'  record its outcome in its status and its queue's events (lib/status.lua)
--          'group'  a job of a group ended: its group comes back (lib/groups.lua)
--          'checkpoint'  delete a resumable job's checkpoint (lib/checkpoint.lua)
-- Returns 1 when acknowledged, 0 when the reservation is no longer held: then nothing changes;
-- 2 when acknowledged but the chain's list was not as the worker read it, and left alone.
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local reply = 1
local unknown = apply_effects(effects_from(2, 2), {
  holds = holds_freed,
  chain = function(at)
    if not chain_done(at) then reply = 2 end
  end,
  batch = batch_done,
  batch_start = batch_start,
  status = status_settled,
  group = group_settled,
  checkpoint = checkpoint_forgotten,
}, 'complete')
if unknown then
  return unknown
end
return reply
