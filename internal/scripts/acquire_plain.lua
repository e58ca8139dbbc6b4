-- acquire_plain takes a plain lock: no fencing counter, no restart delay.
-- It does what SET KEYS[1] ARGV[1] NX GET PX ARGV[2] does, with a reply
-- that is never nil: a client reads a nil reply as an error, which go-redis
-- then runs through its retry checks (allocating in each) on every grant.
--
-- KEYS[1]  the lock name
-- ARGV[1]  the caller's token
-- ARGV[2]  the time to live, in milliseconds
--
-- Returns:
--   time          granted: the key was absent and now holds ARGV[1], or it
--                 already held ARGV[1] (the client resent this request
--                 after losing the reply of a try that was applied, or a
--                 release handed the lock over to it), re-armed; the
--                 node's time in Unix milliseconds, the clock evidence the
--                 vote carries (see internal/node/clock.go), so that a
--                 lone grant needs no TIME beside it; 1 when the node's
--                 user may not run TIME (the vote then carries no clock,
--                 as the batch's refused TIME gave none)
--   holder        the key is held by another value, returned
--   0             the key is a reentrant lock (a hash with an expiry)
--   an error      the key holds something that is not a lock (see alien in
--                 stored.lua, which scripts.go puts in front of this file),
--                 or SET failed otherwise
--
-- One SET ... NX GET rather than GET then SET: a command fewer per call
-- (about a seventh of the script's cost on Redis 7.0).
-- granted is a grant's reply: the node's time in Unix milliseconds (see
-- granted.lua, which scripts.go puts in front of this file), or 1 when the
-- user may not run TIME.
local function granted()
	return node_time() or 1
end

local v = redis.pcall("SET", KEYS[1], ARGV[1], "NX", "GET", "PX", ARGV[2])
if v == false then
	return granted()
end
if type(v) == "table" then
	if string.sub(v.err, 1, 10) == "WRONGTYPE " then
		return alien(KEYS[1]) or 0
	end
	return v
end
if v == ARGV[1] then
	-- Held already by this token: a resent request, or a release that
	-- handed the lock over to this waiter (see hand_over in announce.lua).
	-- The TTL is re-armed, so that the grant's validity counts from this
	-- attempt.
	redis.call("PEXPIRE", KEYS[1], ARGV[2])
	return granted()
end
return v
