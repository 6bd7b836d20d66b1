-- Checkpoints: the cursor a resumable job saves while it runs, kept until the job is done or
-- failed. Shared by checkpoint.lua, which saves one, and the scripts that settle a job
-- (complete.lua, fail.lua), which delete it in the step that acknowledges the job.

-- The checkpoint effect of a settling job (lib/effects.lua): deletes its checkpoint.
--   keys: the checkpoint's key
--   args: none
local function checkpoint_forgotten(at)
  redis.call('del', at.next_key())
end
