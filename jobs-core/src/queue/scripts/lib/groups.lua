-- A queue's groups (docs/groups.md): each group is a sub-queue shaped like the queue, its
-- ready list `<prefix><group>`, its `:delayed` and `:reserved` sets; the groups that may run a
-- job now take turns in the rotation. Shared by pop.lua, which serves them, group_push.lua,
-- which pushes jobs into a group and brings it in, group_touch.lua, which brings groups in
-- after other pushes, group_ended.lua and the settle scripts' `group` effect, which
-- bring a group back when a job of it ends. Group keys are built here from the prefix and a
-- checked group name: they share the queue's hash tag, so on a cluster they are in the slot
-- of the keys the script was given.
--
-- Kept by every script that touches a group:
--   a group is in the rotation (once, and in `rotating`) iff its list is not empty and it is
--     not blocked;
--   a blocked group has ready jobs, and its score says when to look at it again;
--   a group with delayed or reserved jobs is in `due` (possibly early: a look finds nothing
--     due and scores it again), or in the rotation, which looks at it each turn.

-- The keys of a queue's groups, from KEYS in turn: the rotation, the rotating set, the
-- blocked set, the due set, the queue's wake-up list; and from ARGV the groups' key prefix.
local function groups_keys(rotation, rotating, blocked, due, notify, prefix)
  return { rotation = rotation, rotating = rotating, blocked = blocked, due = due,
    notify = notify, prefix = prefix }
end

-- Puts `group` into the rotation unless it is there, blocked, or has no ready job, with a
-- wake-up token: an idle worker has a job to take. Returns whether it did.
local function group_enter(gk, group)
  if redis.call('sismember', gk.rotating, group) == 1 then return false end
  if redis.call('zscore', gk.blocked, group) then return false end
  if redis.call('llen', gk.prefix .. group) == 0 then return false end
  redis.call('sadd', gk.rotating, group)
  redis.call('rpush', gk.rotation, group)
  redis.call('rpush', gk.notify, '1')
  return true
end

-- Scores `group` in the due set by its earliest delayed job or reservation, or takes it out
-- when it has neither.
local function group_due(gk, group)
  local list = gk.prefix .. group
  local next_at
  for _, key in ipairs({ list .. ':delayed', list .. ':reserved' }) do
    local first = redis.call('zrange', key, 0, 0, 'withscores')[2]
    if first then
      local at = tonumber(first)
      if not next_at or at < next_at then next_at = at end
    end
  end
  if next_at then
    redis.call('zadd', gk.due, string.format('%.17g', next_at), group)
  else
    redis.call('zrem', gk.due, group)
  end
end

-- Moves `group`'s due delayed jobs, then its expired reservations (which keep their raised
-- attempts), to the tail of its list, at most `limit` of each. Returns how many it moved.
local function group_migrate(gk, group, now, limit)
  local list = gk.prefix .. group
  local moved = 0
  for _, from in ipairs({ list .. ':delayed', list .. ':reserved' }) do
    local due = redis.call('zrangebyscore', from, '-inf', now, 'limit', 0, limit)
    if #due > 0 then
      redis.call('zremrangebyrank', from, 0, #due - 1)
      rpush_chunked(list, due, 1, #due)
      moved = moved + #due
    end
  end
  return moved
end

-- A job of `group` ended (acknowledged, released or failed): a group blocked at its
-- concurrency limit may run one more, so it comes back into the rotation now rather than
-- when its earliest reservation would expire (it is blocked again at its next turn should it
-- still be at a limit); a paused group stays blocked. Its score in the due set may now be
-- early, which costs one look when it comes.
local function group_ended(gk, group)
  local blocked = redis.call('zscore', gk.blocked, group)
  if blocked and blocked ~= 'inf' then
    redis.call('zrem', gk.blocked, group)
    group_enter(gk, group)
  end
end

-- The `group` effect of a settling script (lib/effects.lua): a job of a group ended; a
-- released one waits in the group's delayed set, so the group is scored in the due set.
--   keys: the rotation, the rotating set, the blocked set, the due set, the wake-up list
--   args: the groups' key prefix, the group, '1' when the job was released
local function group_settled(at)
  local gk = groups_keys(at.next_key(), at.next_key(), at.next_key(), at.next_key(),
    at.next_key(), at.next_arg())
  local group, released = at.next_arg(), at.next_arg()
  group_ended(gk, group)
  if released == '1' then group_due(gk, group) end
end
