-- Holds: the leases a running job keeps on limiter keys (an overlap lock, a funnel slot) and
-- the unique lock of its dispatch. A hold is a key and its owner token: a STRING key is held
-- while its value is the owner; a ZSET key (a funnel) while the owner is a member. Shared by
-- the scripts that settle a job (complete.lua, release.lua, fail.lua) and by leases.lua.

-- Frees the hold of `owner` on `key`, and only that owner's: a lock taken over by another
-- owner since is left alone.
local function free_hold(key, owner)
  local kind = redis.call('type', key)['ok']
  if kind == 'string' then
    if redis.call('get', key) == owner then redis.call('del', key) end
  elseif kind == 'zset' then
    redis.call('zrem', key, owner)
  end
end

-- Frees the holds KEYS[first_key + i] of owners ARGV[first_arg + i], i = 0, 1, ...
local function free_holds(first_key, first_arg)
  for i = 0, #KEYS - first_key do
    free_hold(KEYS[first_key + i], ARGV[first_arg + i])
  end
end

-- The holds effect of a settling job (lib/effects.lua): frees the held keys.
--   keys: the held keys
--   args: how many, then the owner of each, in the order of the keys
local function holds_freed(at)
  for _ = 1, tonumber(at.next_arg()) do
    free_hold(at.next_key(), at.next_arg())
  end
end
