-- A delayed job's due time from the argument the dispatching side gives, shared by later.lua
-- and push_unique.lua.

-- `due` is either a delay in seconds from `now` by the server's clock ("30", "1.5"), or a Unix
-- time in seconds prefixed with "@" ("@1795300856.724") for a job dispatched to run at a point
-- in time.
local function due_at(due, now)
  if string.sub(due, 1, 1) == '@' then
    return tonumber(string.sub(due, 2))
  end
  return now + tonumber(due)
end
