-- clock.lua is not a script of its own: scripts.go puts it in front of the
-- scripts that keep expiry times of their own, those of the semaphore and
-- of the reader-writer lock's readers.

-- now returns this node's time in Unix milliseconds. Redis 5 and later
-- replicate a script's effects, not the script, so reading the clock
-- before writing is allowed.
local function now()
	local t = redis.call("TIME")
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
