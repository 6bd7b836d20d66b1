-- The groups of a queue an operator's read looks at: those in the rotation, blocked, and due,
-- at most `limit` of them, so that the read stays short however many groups there are.
-- Returns the groups, and whether there are more.
local function groups_to_read(rotation, blocked, due, limit)
  local seen, groups = {}, {}
  local left_out = false
  local function add(list)
    for _, group in ipairs(list) do
      if not seen[group] then
        if #groups >= limit then
          left_out = true
          return
        end
        seen[group] = true
        groups[#groups + 1] = group
      end
    end
  end
  add(redis.call('lrange', rotation, 0, limit - 1))
  add(redis.call('zrange', blocked, 0, limit - 1))
  add(redis.call('zrange', due, 0, limit - 1))
  -- A group may be in two of them (rotating with a delayed job, say): only a source longer
  -- than what was read, or a group left out, says that there are more.
  local unread = redis.call('llen', rotation) > limit or redis.call('zcard', blocked) > limit
    or redis.call('zcard', due) > limit
  return groups, left_out or unread
end
