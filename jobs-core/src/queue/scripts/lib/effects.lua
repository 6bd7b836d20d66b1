-- The effects of settling a job, applied by complete.lua and fail.lua in the call that
-- removes its reservation: what the job held, the next link of its chain, its chain's catch
-- job, its count in its batch, its status and events. The caller lists them after its own arguments, each as its
-- name followed by its arguments; each effect takes the keys it needs from KEYS in turn,
-- after the caller's own. apply_effects reads that list; the functions applying each effect
-- live in holds.lua, chain.lua, batch.lua and status.lua.

-- A reader of KEYS and ARGV from the given positions on.
local function effects_from(first_key, first_arg)
  local at = { key = first_key, arg = first_arg }
  function at.next_key()
    at.key = at.key + 1
    return KEYS[at.key - 1]
  end
  function at.next_arg()
    at.arg = at.arg + 1
    return ARGV[at.arg - 1]
  end
  -- The next `n` arguments, as a list.
  function at.next_args(n)
    local list = {}
    for i = 1, n do list[i] = at.next_arg() end
    return list
  end
  function at.done()
    return at.arg > #ARGV
  end
  return at
end

-- Applies the effects listed from `at` on, in turn, each by its entry in `handlers` (effect
-- name -> function(at)). The handlers are the caller's to give: the scripts that apply
-- effects differ in which they accept, and the functions they call are defined after this
-- snippet. Returns nil when every effect is applied, or an error reply naming `script` at the
-- first unknown effect, leaving the effects before it applied.
local function apply_effects(at, handlers, script)
  while not at.done() do
    local effect = at.next_arg()
    local handler = handlers[effect]
    if not handler then
      return redis.error_reply(script .. ': unknown effect ' .. effect)
    end
    handler(at)
  end
  return nil
end
