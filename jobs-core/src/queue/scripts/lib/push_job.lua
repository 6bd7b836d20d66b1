-- Pushing one job onto a queue, shared by the scripts that push a payload they were given or
-- kept (push_unique.lua, a chain's next link, a catch job, a batch's jobs and callbacks), and
-- starting a tracked job's status record as it is pushed (track.lua, an outbox relay's push).

-- Pushes `payload` onto the ready list `target` with a wake-up token on `notify` when `due`
-- is '', else into the delayed set `target` at the time due_at reads from `due`. A job that
-- becomes the earliest delayed one wakes an idle worker, to re-arm its timer.
--
-- A job of a group (`group`, else nil) was routed into the group's list or delayed set
-- (`<queue>:g:<group>`, `...:delayed`: QueueKeys::for_group). The group is then scored due now
-- in `<queue>:groups:due`, so that the next pop looks at it and brings it into the rotation,
-- or scores it by its earliest delayed job (pop.lua), as a dispatch's group_touch.lua would.
local function push_job(target, notify, due, payload, group)
  if due == '' then
    redis.call('rpush', target, payload)
    redis.call('rpush', notify, '1')
  else
    schedule_jobs(target, notify, { due, payload }, 1)
  end
  if group then
    local suffix = ':g:' .. group .. (due == '' and '' or ':delayed')
    local queue = string.sub(target, 1, #target - #suffix)
    if queue .. suffix ~= target then
      error('a job of group ' .. group .. ' was routed to ' .. target)
    end
    redis.call('zadd', queue .. ':groups:due', 0, group)
  end
end

-- The job a link keeps and its group (nil for none). A link is a job a workflow keeps to push
-- later: a line of JSON saying where the job goes (`["queue","due","uuid","job"]`, and its
-- group fifth when it has one), a newline, then the payload; the line is read only for the
-- group.
local function link_parts(link)
  local newline = string.find(link, '\n', 1, true)
  local header = cjson.decode(string.sub(link, 1, newline - 1))
  local group = header[5]
  if group == cjson.null then group = nil end
  return string.sub(link, newline + 1), group
end

-- Pushes the job the link `link` keeps, as push_job does, in its group when it has one.
local function push_link(target, notify, due, link)
  local payload, group = link_parts(link)
  push_job(target, notify, due, payload, group)
end

-- Pushes a unique job as push_job does, with its lock `lock` set to `uuid` for `ms`
-- milliseconds, unless a job holds the lock: then pushes nothing and returns the holder. The
-- push goes first, so that a push Redis refuses (a key of another type) leaves no lock
-- without its job.
local function push_unique_job(lock, uuid, ms, target, notify, due, payload, group)
  local holder = redis.call('get', lock)
  if holder then
    return holder
  end
  push_job(target, notify, due, payload, group)
  redis.call('set', lock, uuid, 'px', tonumber(ms))
  return nil
end

-- Starts the status record `record` (jobs:status:<uuid>) of a tracked job as it is pushed, in
-- `state` ('queued' or 'delayed'), kept `keep_ms` milliseconds, unless it has one already (a
-- worker may have reserved the job first). Returns 1 when the record was made, else 0.
local function start_status(record, state, queue, job, keep_ms)
  if redis.call('exists', record) == 1 then
    return 0
  end
  redis.call('hset', record, 'state', state, 'queue', queue, 'job', job,
    'attempt', '0', 'updated_ms', now_millis())
  redis.call('pexpire', record, keep_ms)
  return 1
end
