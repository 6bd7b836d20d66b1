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
