-- pop: migrate due jobs, then reserve up to ARGV[2] ready jobs: the queue's own and its
-- groups' (lib/groups.lua), in turn.
-- KEYS[1]  queues:<name>            ready list
-- KEYS[2]  queues:<name>:delayed    delayed set
-- KEYS[3]  queues:<name>:reserved   reserved set, score = reservation expiry
-- KEYS[4]  queues:<name>:notify     wake-up tokens
-- KEYS[5]  queues:<name>:events     the queue's events stream
-- KEYS[6]  queues:<name>:groups             the groups' rotation
-- KEYS[7]  queues:<name>:groups:rotating    the groups in it
-- KEYS[8]  queues:<name>:groups:blocked     groups that may not run a job yet
-- KEYS[9]  queues:<name>:groups:due         groups with delayed or reserved jobs
-- KEYS[10] queues:<name>:groups:limits      the groups' limits
-- KEYS[11] queues:<name>:groups:own         jobs the groups gave since the own list's turn
-- ARGV[1]  retry_after in seconds (may have a fraction)
-- ARGV[2]  how many jobs to reserve at most
-- ARGV[3]  how many jobs to migrate at most from each of :delayed and :reserved (a group's
--          too), and how many due or blocked groups to look at
-- ARGV[4]  the events stream's length, when the queue's events are on ('0': off): the
--          reserved jobs then append their `active` events, as one entry
-- ARGV[5]  queues:<name>:g:   what a group's name follows in its keys
-- ARGV[6]  the concurrency of a group that has no limit of its own nor the queue's ('0': none)
-- ARGV[7]  the rate of such a group, '<jobs>/<seconds>' ('': none)
-- Returns { {reserved copy, ...}, microseconds until the next delayed job, reservation or
--           blocked group is due (-1: none), {the group of each copy ('' for the queue's own
--           jobs)}, or {} when none is a group's }
--
-- Migration moves due delayed jobs, then expired reservations, to the tail of the ready list
-- in due order (expired ones keep their incremented attempts), in bounded chunks so that any
-- backlog migrates without one long script; the same for the groups found due. A reserved
-- copy is the popped payload with its top-level "attempts" (the last "attempts" key with a
-- number; only "delay" follows it) raised by one; the payload's other bytes are kept as they
-- are. A payload without that field is reserved unchanged, for the worker to report as
-- malformed.
--
-- While groups rotate, the queue's own list takes one turn in the rotation: once the groups
-- have given as many jobs as there are rotating groups since its last turn (KEYS[11]), its
-- share of a pop, one part in (rotating groups + 1), comes first; and it gives what the
-- groups could not. The groups' turns take the rest, one group
-- after the other from the rotation's head, each moved to the tail as it is served, in rounds
-- of turns until the pop has what it asked for or a round finds nothing. A group
-- serves at most its share of what is left (one job when at least as many groups rotate as
-- jobs are wanted), a group of weight w (`<group>:w` in the limits hash) w shares, keeping its
-- place at the head across pops until it has had them (`<group>:s`), within its concurrency (its running jobs are its reservations) and its
-- rate (GCRA, `<group>:tat`); a group at a limit, or paused, leaves the rotation for the
-- blocked set. A rotating group's expired reservations come back when it leaves the rotation
-- (then it is in the due set, scored by its earliest reservation), at the tail of its list,
-- as Laravel's expired reservations come back at the tail of the queue's. Finally the notify
-- list is set to one token per ready job of the queue's own and one per rotating group.
local now, now_precise = now_seconds_and_precise()
local migrate_limit = tonumber(ARGV[3])
local gk = groups_keys(KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[4], ARGV[5])

-- Migrates the due members of the set `from`, and returns the score of its earliest member
-- left (nil: none). A set whose earliest member is not due costs this one call.
local function migrate(from)
  local first = redis.call('zrange', from, 0, 0, 'withscores')[2]
  if not first or first == 'inf' or tonumber(first) > now then return first end
  local due = redis.call('zrangebyscore', from, '-inf', now, 'limit', 0, migrate_limit)
  redis.call('zremrangebyrank', from, 0, #due - 1)
  rpush_chunked(KEYS[1], due, 1, #due)
  return redis.call('zrange', from, 0, 0, 'withscores')[2]
end
local delayed_first = migrate(KEYS[2])
local reserved_first = migrate(KEYS[3])

-- A queue without groups costs its pops this one call.
local has_groups = redis.call('exists', gk.rotation, gk.due, gk.blocked) > 0

if has_groups then
  -- Groups whose delayed jobs or reservations fell due, and blocked groups whose time came.
  for _, group in ipairs(redis.call('zrangebyscore', gk.due, '-inf', now, 'limit', 0,
      migrate_limit)) do
    group_migrate(gk, group, now, migrate_limit)
    group_due(gk, group)
    group_enter(gk, group)
  end
  -- A group blocked at its concurrency limit is looked at again when its earliest reservation
  -- expires (a job that ends brings it back sooner): its expired reservations are its dead
  -- workers' jobs, and free their slots as they come back.
  for _, group in ipairs(redis.call('zrangebyscore', gk.blocked, '-inf', now, 'limit', 0,
      migrate_limit)) do
    redis.call('zrem', gk.blocked, group)
    group_migrate(gk, group, now, migrate_limit)
    group_enter(gk, group)
  end
end

local reserved = {}
local groups_of = {}
local events = { uuids = {}, jobs = {}, attempts = {} }
local with_events = ARGV[4] ~= '0'
-- redis.call formats a number argument each time it is given, and Lua formats a number each
-- time it is joined to a string; the texts are made once per call instead ('%.17g' keeps
-- every bit of the score).
local expires = string.format('%.17g', now + tonumber(ARGV[1]))
local raised = {}

-- Reserves up to `count` jobs from the list `from` into the set `into`, noting `group` ('' for
-- the queue's own) for each. Returns how many.
local function reserve(from, into, count, group)
  if count <= 0 then return 0 end
  local popped
  if count == 1 then
    -- A group's turn among many takes one job: a bare LPOP answers a string, not a list.
    popped = redis.call('lpop', from)
    if not popped then return 0 end
    popped = { popped }
  else
    popped = redis.call('lpop', from, count)
    if not popped then return 0 end
  end
  local scored = {}
  local grouped = group ~= '' or #groups_of > 0
  for i, job in ipairs(popped) do
    local first, last = attempts_at(job, math.max(1, #job - 64))
    local next_attempts = '0'
    if first then
      local attempts = string.sub(job, first, last - 1)
      next_attempts = raised[attempts]
      if not next_attempts then
        next_attempts = tostring(tonumber(attempts) + 1)
        raised[attempts] = next_attempts
      end
      job = string.sub(job, 1, first - 1) .. next_attempts .. string.sub(job, last)
    end
    local at = #reserved + 1
    reserved[at] = job
    if grouped then
      for j = #groups_of + 1, at - 1 do groups_of[j] = '' end
      groups_of[at] = group
    end
    if with_events then
      events.uuids[at] = payload_uuid(job)
      events.jobs[at] = payload_job(job)
      events.attempts[at] = next_attempts
    end
    scored[2 * i - 1] = expires
    scored[2 * i] = job
  end
  if #scored == 2 then
    redis.call('zadd', into, expires, scored[2])
  else
    for i = 1, #scored, 2000 do
      redis.call('zadd', into, unpack(scored, i, math.min(i + 1999, #scored)))
    end
  end
  return #popped
end

-- Blocks `group`, taken from the rotation, until `until_score`. Out of the rotation, its
-- reservations are looked after by the due set, as when its list runs short: a group blocked
-- with its list emptied may leave the blocked set with nothing ready (a job of it ended), and
-- its running jobs' reservations must still come back should their workers die.
local function block(group, until_score)
  redis.call('srem', gk.rotating, group)
  redis.call('zadd', gk.blocked, until_score, group)
  group_due(gk, group)
end

-- What `group`'s rate ('<jobs>/<seconds>') allows now: how many jobs it may start, when the
-- next one may start once none may, and the theoretical arrival time and interval of GCRA;
-- nil when it has no rate.
local function rate_allows(group, rate)
  if not rate or rate == '' then return nil end
  local jobs, seconds = string.match(rate, '^(%d+)/(%d+%.?%d*)$')
  if not jobs or tonumber(jobs) == 0 then return nil end
  local period = tonumber(seconds)
  local interval = period / tonumber(jobs)
  local tat = math.max(tonumber(redis.call('get', gk.prefix .. group .. ':tat') or '0'), now)
  return {
    allowed = math.floor((now + period - tat) / interval + 1e-9),
    next_at = tat + interval - period,
    tat = tat,
    interval = interval,
  }
end

-- Serves the rotation's `turns` groups, one turn each, until `want` jobs are reserved or every
-- one has had a turn. Returns how many it reserved. Each round takes as many
-- groups from the rotation's head as jobs are still wanted and puts those that stay back at
-- its tail, in turn order, and any it did not reach back at its head: the order one LMOVE per
-- turn would leave, for two calls a round instead of one a turn.
local function serve_groups(want, turns)
  local taken = 0
  -- Most queues store no limits: their groups' are the worker's, read from ARGV.
  local stored_limits = redis.call('exists', KEYS[10]) == 1
  local no_limits = { false, false, false, false, false, false, false }
  local default_concurrency = tonumber(ARGV[6]) or 0
  while want - taken > 0 and turns > 0 do
    local round = redis.call('lpop', gk.rotation, math.min(turns, want - taken))
    if not round then break end
    turns = turns - #round
    local stay, reached = {}, #round
    for i, group in ipairs(round) do
      if want - taken <= 0 then
        reached = i - 1
        break
      end
      local list = gk.prefix .. group
      local running = list .. ':reserved'
      local limits = no_limits
      if stored_limits then
        limits = redis.call('hmget', KEYS[10], group .. ':c', group .. ':r', group .. ':p', '*:c',
          '*:r', group .. ':w', group .. ':s')
      end
      local weight = tonumber(limits[6]) or 1
      -- The jobs a weighted group has had in a turn that a pop ran out of jobs to give.
      local served = tonumber(limits[7]) or 0
      local concurrency = default_concurrency
      if limits[1] or limits[4] then concurrency = tonumber(limits[1] or limits[4]) or 0 end
      local allowed = want - taken
      if concurrency > 0 then
        allowed = math.min(allowed, concurrency - redis.call('zcard', running))
      end
      local rate = rate_allows(group, limits[2] or limits[5] or ARGV[7])
      local turn_open = false
      if limits[3] then
        block(group, '+inf')
      elseif allowed <= 0 then
        block(group, redis.call('zrange', running, 0, 0, 'withscores')[2] or now)
      elseif rate and rate.allowed <= 0 then
        block(group, string.format('%.17g', rate.next_at))
      else
        -- Its share of what is left among the groups still to have a turn; a group of weight
        -- w has w shares, less what it had of this turn in the pops before.
        local share = math.ceil((want - taken) / (turns + #round - i + 1))
        local turn = math.max(1, share * weight - served)
        local count = math.min(allowed, turn)
        if rate then count = math.min(count, rate.allowed) end
        local got = reserve(list, running, count, group)
        taken = taken + got
        if rate and got > 0 then
          local next_tat = rate.tat + got * rate.interval
          redis.call('set', list .. ':tat', string.format('%.17g', next_tat), 'px',
            math.max(1, math.ceil((next_tat - now) * 1000)))
        end
        turn_open = weight > 1 and got == count and got < turn and want - taken <= 0
        -- A list found short is empty now. One that gave all asked may be too: its next turn
        -- finds it so, which costs less than asking its length at every turn.
        if got < count then
          redis.call('srem', gk.rotating, group)
          group_due(gk, group)
        elseif turn_open then
          -- The pop ran out before the group had its turn: it keeps its place at the head,
          -- so that a weight holds however few jobs each pop takes.
          redis.call('hset', KEYS[10], group .. ':s', served + got)
        else
          stay[#stay + 1] = group
        end
      end
      if served > 0 and not turn_open then
        redis.call('hdel', KEYS[10], group .. ':s')
      end
      if turn_open then
        reached = i - 1
        break
      end
    end
    if #stay > 0 then redis.call('rpush', gk.rotation, unpack(stay)) end
    if reached < #round then
      -- LPUSH puts each at the head in turn: the last first keeps their order.
      local unreached = {}
      for i = #round, reached + 1, -1 do unreached[#unreached + 1] = round[i] end
      redis.call('lpush', gk.rotation, unpack(unreached))
    end
  end
  return taken
end

-- Reserves up to `count` jobs of the queue's own list, noting whether it was found empty
-- (then its length need not be asked).
local own_emptied = false
local own_reserved = 0
local function reserve_own(count)
  local got = reserve(KEYS[1], KEYS[3], count, '')
  if got < count then own_emptied = true end
  own_reserved = own_reserved + got
  return got
end

local want = tonumber(ARGV[2])
local rotating = 0
if has_groups then rotating = redis.call('llen', gk.rotation) end
if rotating == 0 then
  reserve_own(want)
else
  -- A pop of one job at a time serves the own list once in every (rotating groups + 1).
  local since = tonumber(redis.call('get', KEYS[11]) or '') or rotating
  local own = 0
  if since >= rotating then
    own = reserve_own(math.ceil(want / (rotating + 1)))
  end
  -- Every rotating group has a turn before any has a second; while jobs are still wanted
  -- and the last round of turns found some, the rotation gives another, so that a pop comes
  -- back short only when the queue has no more to give it now.
  local served = 0
  while rotating > 0 do
    local got = serve_groups(want - own - served, rotating)
    served = served + got
    if got == 0 or want - own - served <= 0 then break end
    rotating = redis.call('llen', gk.rotation)
  end
  local rest = reserve_own(want - own - served)
  local now_since = since + served
  if rest > 0 then
    now_since = 0
  elseif own > 0 then
    now_since = served
  end
  if now_since ~= since then
    redis.call('set', KEYS[11], now_since, 'ex', 86400)
  end
end
if with_events then
  status_events(KEYS[5], ARGV[4], 'active', events.uuids, events.jobs, events.attempts)
end

local ready = 0
if not own_emptied then ready = redis.call('llen', KEYS[1]) end
if has_groups then ready = ready + redis.call('llen', gk.rotation) end
local tokens = 0
if ready == 0 then
  redis.call('del', KEYS[4])
else
  tokens = redis.call('llen', KEYS[4])
end
if tokens > ready then
  redis.call('ltrim', KEYS[4], 0, ready - 1)
elseif tokens < ready then
  local ones = {}
  for i = 1, math.min(ready - tokens, 1000) do ones[i] = '1' end
  local missing = ready - tokens
  while missing > 0 do
    local n = math.min(missing, #ones)
    redis.call('rpush', KEYS[4], unpack(ones, 1, n))
    missing = missing - n
  end
end

-- The earliest of the delayed jobs, the reservations (the earliest left by the migration, or
-- one made now) and, with groups, the due and blocked groups. A member is taken once `now`, in
-- whole milliseconds, reaches its score: the time until then is measured from the clock to
-- the microsecond (from `now` it would be up to a millisecond long), to the first whole
-- millisecond at or after the score (a score with a finer fraction is taken only then).
local next_due = -1
local function note_due(score)
  if score and score ~= 'inf' then
    local ms = tonumber(score) * 1000
    local whole = math.floor(ms + 0.5)
    if math.abs(ms - whole) > 1e-3 then whole = math.ceil(ms) end
    local us = math.max(0, math.ceil((whole / 1000 - now_precise) * 1000000))
    if next_due < 0 or us < next_due then next_due = us end
  end
end
note_due(delayed_first)
note_due(reserved_first)
if own_reserved > 0 then note_due(expires) end
if has_groups then
  note_due(redis.call('zrange', gk.due, 0, 0, 'withscores')[2])
  note_due(redis.call('zrange', gk.blocked, 0, 0, 'withscores')[2])
end
return { reserved, next_due, groups_of }
