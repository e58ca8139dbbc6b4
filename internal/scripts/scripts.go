// Package scripts holds the Lua scripts the lock runs on each Redis node.
// Each script is a .lua file beside this one, whose opening comment states
// its KEYS, ARGV and return values; it is embedded at build time and wrapped
// once in a redis.Script (EVALSHA, falling back to EVAL when a node does not
// have the script cached yet).
// guard.lua, stored.lua and announce.lua are the exceptions: not scripts,
// but functions that several scripts share, put in front of each.
package scripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed release.lua
	releaseSource string
	//go:embed extend.lua
	extendSource string
	//go:embed acquire_reentrant.lua
	acquireReentrantSource string
	//go:embed release_reentrant.lua
	releaseReentrantSource string
	//go:embed extend_reentrant.lua
	extendReentrantSource string
	//go:embed guard.lua
	guardSource string
	//go:embed acquire.lua
	acquireSource string
	//go:embed acquire_plain.lua
	acquirePlainSource string
	//go:embed fence.lua
	fenceSource string
	//go:embed set_fenced.lua
	setFencedSource string
	//go:embed announce.lua
	announceSource string
	//go:embed stored.lua
	storedSource string
	//go:embed inspect.lua
	inspectSource string
	//go:embed force_release.lua
	forceReleaseSource string
)

// Release deletes KEYS[1] if it holds ARGV[1] and announces "ARGV[1]|next"
// on ARGV[2], next popped from the waiters' queue KEYS[2]; it returns the
// node's run id when the key was absent (0 when ARGV[2] is ""), -1 when it
// held something else, else 1 + 2 × the clients the announcement reached,
// + 1 when it named a waiter.
var Release = redis.NewScript(storedSource + announceSource + releaseSource)

// Extend sets KEYS[1]'s expiry to ARGV[2] ms if it holds ARGV[1]; it returns 1 or 0.
var Extend = redis.NewScript(storedSource + extendSource)

// AcquirePlain sets KEYS[1] to ARGV[1] with ttl ARGV[2] ms if absent; it
// returns 1 when KEYS[1] holds ARGV[1] (now, or already), the value holding
// it otherwise, 0 when a reentrant lock holds it, and an error reply when
// KEYS[1] holds something that is not a lock.
var AcquirePlain = redis.NewScript(storedSource + acquirePlainSource)

// Acquire sets KEYS[1] to ARGV[1] with ttl ARGV[2] ms if absent, unless
// the node has been up less than ARGV[3] seconds; it returns
// {status, n[, holder]}: {1, counter} granted, {0, counter, holder} held,
// {-1, uptime} refused, where counter is the fencing counter KEYS[2] ("0"
// without it) and holder the value holding KEYS[1]; an error reply when
// KEYS[1] holds something that is not a lock.
var Acquire = redis.NewScript(guardSource + storedSource + acquireSource)

// AcquireReentrant takes or re-takes the reentrant lock KEYS[1] for owner
// ARGV[1] with ttl ARGV[2] ms (ARGV[3] "1": only if it still exists),
// unless the node has been up less than ARGV[4] seconds; it returns
// {holds, counter} (holds 0: held by another) or {-1, uptime}; an error
// reply when KEYS[1] holds something that is not a lock.
var AcquireReentrant = redis.NewScript(guardSource + storedSource + acquireReentrantSource)

// ReleaseReentrant drops one hold (ARGV[2] "0"), all ("1") or the hold of a
// failed acquisition ("2", deleting the key at zero) of owner
// ARGV[1] on KEYS[1], publishing ARGV[4] on ARGV[3] when the key goes; it
// returns the node's run id when the key was absent (for ARGV[2] "1"; 0
// otherwise), -1 when it held something else, else 1 + 2 × the clients the
// announcement reached (+ 1 when it named a waiter).
var ReleaseReentrant = redis.NewScript(storedSource + announceSource + releaseReentrantSource)

// ExtendReentrant sets KEYS[1]'s expiry to ARGV[2] ms if owner ARGV[1]
// holds it; it returns 1 or 0.
var ExtendReentrant = redis.NewScript(extendReentrantSource)

// Fence raises the fencing counter KEYS[2] to ARGV[2] and returns 1 if the
// lock KEYS[1] holds token or owner ARGV[1] (ARGV[3] "1": reentrant), else 0.
var Fence = redis.NewScript(storedSource + fenceSource)

// SetFenced sets KEYS[1] to ARGV[1] and KEYS[2] to the fencing token ARGV[2]
// unless KEYS[2] holds a higher token; it returns 1 when written, 0 when not.
var SetFenced = redis.NewScript(setFencedSource)

// Inspect reads the lock KEYS[1] and the fencing counter KEYS[2], changing
// nothing; it returns {kind, pttl, holder, holds, counter} (kind "none",
// "string" or "hash"), or an error reply when KEYS[1] holds something that
// is not a lock.
var Inspect = redis.NewScript(storedSource + inspectSource)

// ForceRelease deletes the lock KEYS[1] whoever holds it and announces the
// release on ARGV[1] (a reentrant lock's with the id ARGV[2]), popping the
// next waiter from KEYS[2]; it returns {0, "", "none"} when the key was
// absent, else {1 + 2 × the clients that heard it (+ 1 when it named a
// waiter), holder, kind}, or an error reply, deleting nothing, when KEYS[1]
// holds something that is not a lock. It never touches the fencing counter.
var ForceRelease = redis.NewScript(storedSource + announceSource + forceReleaseSource)

// All is every script a lock node runs, to load into its cache at once.
var All = []*redis.Script{AcquirePlain, Release, Extend, AcquireReentrant, ReleaseReentrant, ExtendReentrant, Acquire, Fence, Inspect, ForceRelease}
