-- Appending many values to a list at once, shared by the scripts that push or move jobs.

-- Appends `values[first..last]` to the list `key`, in chunks small enough for unpack. Returns
-- the list's length after, as RPUSH does (nil when there was nothing to append).
local function rpush_chunked(key, values, first, last)
  local len
  for i = first, last, 1000 do
    len = redis.call('rpush', key, unpack(values, i, math.min(i + 999, last)))
  end
  return len
end

-- Appends the ready jobs `payloads` to the list `target`, and a wake-up token for each to its
-- queue's `notify`. Returns the list's length after.
local function push_ready_jobs(target, notify, payloads)
  local len = rpush_chunked(target, payloads, 1, #payloads)
  local tokens = {}
  for i = 1, #payloads do tokens[i] = '1' end
  rpush_chunked(notify, tokens, 1, #tokens)
  return len
end
