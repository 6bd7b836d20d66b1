-- complete: acknowledge a finished job and apply what finishing it changes, in one step and
-- only if its reservation was still held (rule: a side effect of finishing a job happens in the
-- same atomic step as its acknowledgement).
-- KEYS[1]  queues:<name>:reserved
-- KEYS[2..] the keys of the effects, in turn (lib/effects.lua)
-- ARGV[1]  the reserved copy, byte for byte as pop returned it
-- ARGV[2..] the effects, each its name and its arguments:
--          'holds'  free what the job held (lib/holds.lua)
--          'chain'  push the chain's next link (lib/chain.lua)
--          'batch'  count the job done in its batch, with the jobs it added (lib/batch.lua)
--          'batch_start'  start the batch the chain reached (lib/batch.lua)
-- Returns 1 when acknowledged, 0 when the reservation is no longer held: then nothing changes;
-- 2 when acknowledged but the chain's list was not as the worker read it, and left alone.
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local reply = 1
local at = effects_from(2, 2)
while not at.done() do
  local effect = at.next_arg()
  if effect == 'holds' then
    holds_freed(at)
  elseif effect == 'chain' then
    if not chain_done(at) then reply = 2 end
  elseif effect == 'batch' then
    batch_done(at)
  elseif effect == 'batch_start' then
    batch_start(at)
  else
    return redis.error_reply('complete: unknown effect ' .. effect)
  end
end
return reply
