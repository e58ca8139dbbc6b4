-- guard.lua is not a script of its own: scripts.go puts it in front of
-- acquire.lua and acquire_reentrant.lua, which share these two steps.

-- recovering returns the node's uptime in seconds, as text, when it is
-- below least (a decimal string; "0" for no check), and nil otherwise. A
-- node restarted without persistence has lost its locks: until the longest
-- TTL in use has passed since it started, its grant could help a second
-- holder to a quorum.
local function recovering(least)
	if least == "0" then
		return nil
	end
	local up = tonumber(string.match(redis.call("INFO", "server"), "uptime_in_seconds:(%d+)"))
	if up < tonumber(least) then
		return tostring(up)
	end
	return nil
end

-- counter returns the lock's fencing counter KEYS[2] as stored, or "0"
-- when it is absent or the lock is not fenced (no KEYS[2]).
local function counter()
	if #KEYS > 1 then
		return redis.call("GET", KEYS[2]) or "0"
	end
	return "0"
end
