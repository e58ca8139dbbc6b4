-- granted.lua is not a script of its own: scripts.go puts it in front of
-- write_acquire.lua and release.lua, and in acquire_plain.lua's script after
-- its first lines.

-- node_time returns the node's time in Unix milliseconds, the clock
-- evidence a vote carries (see internal/node/clock.go), or nil when the
-- node's user may not run TIME: the vote then carries no clock.
local function node_time()
	local t = redis.pcall("TIME")
	if t.err then
		return nil
	end
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
