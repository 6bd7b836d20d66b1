-- Taking a retried unique job's lock again, shared by retry.lua and retry_push.lua.

-- Sets the lock `key` to `uuid` for `ms` milliseconds and returns true, unless another job
-- holds it (one was dispatched since this one failed): then returns false and changes nothing.
local function retake_unique(key, uuid, ms)
  local holder = redis.call('get', key)
  if holder and holder ~= uuid then
    return false
  end
  redis.call('set', key, uuid, 'px', tonumber(ms))
  return true
end
