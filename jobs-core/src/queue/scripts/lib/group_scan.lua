-- The groups of a queue an operator's read looks at: those in the rotation, blocked, and due,
-- at most `limit` of them, so that the read stays short however many groups there are.
-- Returns the groups, and whether there are more.
local function groups_to_read(rotation, blocked, due, limit)
  local seen, groups = {}, {}
  local function add(list)
    for _, group in ipairs(list) do
      if #groups >= limit then return end
      if not seen[group] then
        seen[group] = true
        groups[#groups + 1] = group
      end
    end
  end
  add(redis.call('lrange', rotation, 0, limit - 1))
  add(redis.call('zrange', blocked, 0, limit - 1))
  add(redis.call('zrange', due, 0, limit - 1))
  local known = redis.call('llen', rotation) + redis.call('zcard', blocked)
    + redis.call('zcard', due)
  return groups, known > #groups
end
