-- Delayed jobs: a due time from the argument the dispatching side gives, shared by every
-- script that pushes a delayed job, and scheduling delayed jobs (later.lua, group_push.lua,
-- push_job.lua).

-- `due` is either a delay in seconds from `now` by the server's clock ("30", "1.5"), or a Unix
-- time in seconds prefixed with "@" ("@1795300856.724") for a job dispatched to run at a point
-- in time.
local function due_at(due, now)
  if string.sub(due, 1, 1) == '@' then
    return tonumber(string.sub(due, 2))
  end
  return now + tonumber(due)
end

-- Adds delayed jobs to the delayed set `delayed`: `args` from `first` on, in pairs of a due
-- time (as due_at reads it) and a payload. When one becomes the earliest, a wake-up token goes
-- to `notify`, so that an idle worker wakes, sees the new due time and re-arms its timer.
-- Returns how many it added.
local function schedule_jobs(delayed, notify, args, first)
  local now = now_seconds()
  local head = redis.call('zrange', delayed, 0, 0)[1]
  for i = first, #args, 2 do
    redis.call('zadd', delayed, due_at(args[i], now), args[i + 1])
  end
  if redis.call('zrange', delayed, 0, 0)[1] ~= head then
    redis.call('rpush', notify, '1')
  end
  return (#args - first + 1) / 2
end
