-- acquire_plain takes a plain lock: no fencing counter, no restart delay.
-- It does what SET KEYS[1] ARGV[1] NX GET PX ARGV[2] does, with a reply
-- that is never nil: a client reads a nil reply as an error, which go-redis
-- then runs through its retry checks (allocating in each) on every grant.
--
-- KEYS[1]  the lock name
-- ARGV[1]  the caller's token
-- ARGV[2]  the time to live, in milliseconds
-- ARGV[3]  "1": a grant reads the node's time (see Returns); else it
--          does not (the caller's clock guard has a fresh reading)
--
-- Returns:
--   time          granted: the key was absent and now holds ARGV[1], or it
--                 already held ARGV[1] (the client resent this request
--                 after losing the reply of a try that was applied, or a
--                 release handed the lock over to it), re-armed; with
--                 ARGV[3] "1", the node's time in Unix milliseconds, the
--                 clock evidence the vote carries (see
--                 internal/node/clock.go), so that a lone grant needs no
--                 TIME beside it; 1 without, or when the node's user may
--                 not run TIME (the vote then carries no clock, as the
--                 batch's refused TIME gave none)
--   holder        the key is held by another value, returned
--   0             the key is a reentrant lock (a hash with an expiry)
--   an error      the key holds something that is not a lock (see alien in
--                 stored.lua, which scripts.go puts in front of this file),
--                 or SET failed otherwise
--
-- A grant ends here, ahead of the functions the rest
-- needs (stored.lua, granted.lua and acquire_plain_tail.lua follow, put
-- there by scripts.go): Lua makes a closure of each local function a
-- script defines, on every call, whether it runs or not.
--
-- One SET ... NX GET rather than GET then SET: a command fewer per call
-- (about a seventh of the script's cost on Redis 7.0).
local v = redis.pcall("SET", KEYS[1], ARGV[1], "NX", "GET", "PX", ARGV[2])
if v == false then
	-- Granted: nothing more runs (see release_head.lua). The node's time,
	-- when asked, is read here as node_time in granted.lua reads it.
	if ARGV[3] ~= "1" then
		return 1
	end
	local t = redis.pcall("TIME")
	if t.err then
		return 1
	end
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
