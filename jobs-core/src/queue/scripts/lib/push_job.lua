-- Pushing one job onto a queue, shared by the scripts that push a payload they were given or
-- kept (push_unique.lua, a chain's next link, a catch job).

-- Pushes `payload` onto the ready list `target` with a wake-up token on `notify` when `due`
-- is '', else into the delayed set `target` at the time due_at reads from `due`. A job that
-- becomes the earliest delayed one wakes an idle worker, to re-arm its timer.
local function push_job(target, notify, due, payload)
  if due == '' then
    redis.call('rpush', target, payload)
    redis.call('rpush', notify, '1')
    return
  end
  local head = redis.call('zrange', target, 0, 0)[1]
  redis.call('zadd', target, due_at(due, now_seconds()), payload)
  if redis.call('zrange', target, 0, 0)[1] ~= head then
    redis.call('rpush', notify, '1')
  end
end

-- Pushes a unique job as push_job does, with its lock `lock` set to `uuid` for `ms`
-- milliseconds, unless a job holds the lock: then pushes nothing and returns the holder. The
-- push goes first, so that a push Redis refuses (a key of another type) leaves no lock
-- without its job.
local function push_unique_job(lock, uuid, ms, target, notify, due, payload)
  local holder = redis.call('get', lock)
  if holder then
    return holder
  end
  push_job(target, notify, due, payload)
  redis.call('set', lock, uuid, 'px', tonumber(ms))
  return nil
end
