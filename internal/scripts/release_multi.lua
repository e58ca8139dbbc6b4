-- release_multi deletes the keys of a multi-name lock that still hold the
-- caller's token, and announces each release on its name's channel.
--
-- KEYS     the lock names
-- ARGV[1]  the caller's token
-- ARGV[2]  the prefix of the names' release channels (the channel of a
--          name is the prefix followed by the name); "" announces nothing
--          (the cleanup of a failed attempt frees nothing anyone waits for)
--
-- A multi-name lock queues no waiters: every process waiting on one of
-- its names hears the release and may try (see announce.lua for the plain
-- lock's queue). A PUBLISH the node refuses (an ACL user without the
-- channels) reaches no one instead of failing the release.
--
-- Returns, as release.lua does: when some keys held ARGV[1], they were
-- deleted and the script returns 1 + 2 × the clients the announcements
-- reached; when none did and a key held another value or type, "taken:"
-- and the run id (see server in stored.lua), or -1 for an undo; when
-- every key was absent (expired, or deleted by an earlier try of this same
-- release, resent by the client), the node's run id (see server in
-- stored.lua), or 0 for a release that announces nothing; an error reply
-- when GET failed.
local deleted, others = 0, false
for _, key in ipairs(KEYS) do
	local v = stored(key)
	if type(v) == "table" then
		return v
	end
	if v == ARGV[1] then
		redis.call("DEL", key)
		deleted = deleted + 1
	elseif v ~= false then
		others = true
	end
end
if deleted > 0 then
	local heard = 0
	if ARGV[2] ~= "" then
		for _, key in ipairs(KEYS) do
			local n = redis.pcall("PUBLISH", ARGV[2] .. key, ARGV[1] .. "|")
			if type(n) == "number" then
				heard = heard + n
			end
		end
	end
	return 1 + 2 * heard
end
if others and ARGV[2] ~= "" then
	return "taken:" .. server()
elseif others then
	return -1
end
if ARGV[2] ~= "" then
	return server()
end
return 0
