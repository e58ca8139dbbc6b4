-- extend_many is extend.lua's rule for several locks in one call: renewal
-- sends the plain extensions that fall due together as one request per
-- node (see internal/node's Extensions), which costs the server one script
-- call where there were as many as locks. Each key is judged alone,
-- exactly as extend.lua judges it.
--
-- KEYS[i]      a lock name
-- ARGV[2i-1]   the token of KEYS[i]'s caller
-- ARGV[2i]     KEYS[i]'s new time to live, in milliseconds
--
-- Returns an array with one integer per key: 1 when the key held its token
-- and its expiry was set, 0 otherwise (a key of another type is not the
-- caller's), -1 when GET failed otherwise (where extend.lua would answer
-- GET's error: that key's extension fails on this node).
local out = {}
for i, key in ipairs(KEYS) do
	local v = redis.pcall("GET", key)
	if v == ARGV[2 * i - 1] then
		out[i] = redis.call("PEXPIRE", key, ARGV[2 * i])
	elseif type(v) == "table" and v.err and string.sub(v.err, 1, 10) ~= "WRONGTYPE " then
		out[i] = -1
	else
		out[i] = 0
	end
end
return out
