-- Chains. The links still to run wait in the list jobs:chain:<id>, the catch job in the string
-- jobs:chain:<id>:catch. Each is a link (lib/push_job.lua): a line of JSON saying where the job
-- goes, a newline, then the payload to push.

-- A link finished: push the next one and keep the rest, with what the link prepended and
-- appended from its handler.
--   keys: the chain's list, its catch, the next link's ready list (or delayed set when it has
--         a due time), the next link's queue's notify
--   args: the head of the list as the worker read it, to pop ('' to pop nothing: a prepended
--         link runs next), the link to push ('' when the chain is over, or when the head is a
--         batch, which starts instead), its due time ('' ready),
--         the number of links to put in front of the list, those links in order, the number
--         to append, those links
-- Returns false when the list's head is no longer the one the worker read: then the chain
-- is left as it is.
local function chain_done(at)
  local list, catch, target, notify = at.next_key(), at.next_key(), at.next_key(), at.next_key()
  local head, next, due = at.next_arg(), at.next_arg(), at.next_arg()
  local front = at.next_args(tonumber(at.next_arg()))
  local back = at.next_args(tonumber(at.next_arg()))
  if head ~= '' then
    if redis.call('lindex', list, 0) ~= head then
      return false
    end
    redis.call('lpop', list)
  end
  for i = #front, 1, -1 do
    redis.call('lpush', list, front[i])
  end
  if #back > 0 then
    redis.call('rpush', list, unpack(back))
  end
  if next ~= '' then
    -- A chain kept for a failed link that was retried runs on without expiring.
    redis.call('persist', list)
    push_link(target, notify, due, next)
  elseif redis.call('llen', list) == 0 then
    redis.call('del', list, catch)
  end
  -- (Nothing pushed with links left: the head popped was a batch, which the 'batch_start'
  -- effect starts in the same call; the link after it follows the batch.)
  return true
end

-- A link failed for good: push the catch job, once, and keep the links after it for as long
-- as the failed-job store keeps the failed link, so that retrying it picks the chain up.
--   keys: the chain's list, its catch, the catch job's ready list (or delayed set), its notify
--   args: the catch link as the worker read it ('' for none), its due time ('' ready), how
--         long to keep the rest, in seconds
local function chain_failed(at)
  local list, catch, target, notify = at.next_key(), at.next_key(), at.next_key(), at.next_key()
  local link, due, keep = at.next_arg(), at.next_arg(), at.next_arg()
  if link ~= '' and redis.call('get', catch) == link then
    redis.call('del', catch)
    push_link(target, notify, due, link)
  end
  redis.call('expire', list, tonumber(keep))
end
