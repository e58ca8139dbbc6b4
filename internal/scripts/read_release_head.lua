-- read_release_head.lua is not a script of its own: scripts.go puts it
-- first in read_release.lua's source, after clock.lua, announce.lua and
-- rw_base.lua and ahead of the functions only the rest needs (Lua makes a
-- closure of each local function a script defines, on every call, whether
-- it runs or not). It drops the caller's field, and ends the release of a
-- live reader that leaves many fields, or none but the mark; the rest of
-- read_release.lua goes on from t, expiry, was and left.
local t = now()
-- The caller's own field first: only a readers' hash holds a reader's
-- token as a field (a plain lock is a string, whose HGET fails; a
-- reentrant lock's hash is keyed by its own token), so when it is there
-- the key's kind need not be asked.
local was, left = false, 0
local expiry = redis.pcall("HGET", KEYS[1], ARGV[1])
if type(expiry) == "string" then
	redis.call("HDEL", KEYS[1], ARGV[1]) -- also a hold that expired
	was = tonumber(expiry) > t
	if was then
		left = redis.call("HLEN", KEYS[1])
		if left > SMALL then
			return 1 -- other readers hold it (or may: many fields are left): no one waits for this release
		end
		if left == 1 then
			redis.call("DEL", KEYS[1]) -- the mark alone is left
			if ARGV[2] == "" then
				return 1
			end
			return 1 + announce(ARGV[2], ARGV[1], next_waiter())
		end
	end
end
