// Package scripts holds the Lua scripts the lock runs on each Redis node.
// Each script is a .lua file beside this one, whose opening comment states
// its KEYS, ARGV and return values; it is embedded at build time and wrapped
// once in a redis.Script (EVALSHA, falling back to EVAL when a node does not
// have the script cached yet).
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
)

// Release deletes KEYS[1] if it holds ARGV[1] and publishes on ARGV[2]; it
// returns 1 or 0.
var Release = redis.NewScript(releaseSource)

// Extend sets KEYS[1]'s expiry to ARGV[2] ms if it holds ARGV[1]; it returns 1 or 0.
var Extend = redis.NewScript(extendSource)

// AcquireReentrant takes or re-takes the reentrant lock KEYS[1] for owner
// ARGV[1] with ttl ARGV[2] ms (ARGV[3] "1": only if it still exists); it
// returns the hold count, or 0.
var AcquireReentrant = redis.NewScript(acquireReentrantSource)

// ReleaseReentrant drops one hold (ARGV[2] "0") or all ("1") of owner
// ARGV[1] on KEYS[1], publishing ARGV[4] on ARGV[3] when the key goes; it
// returns 1 or 0.
var ReleaseReentrant = redis.NewScript(releaseReentrantSource)

// ExtendReentrant sets KEYS[1]'s expiry to ARGV[2] ms if owner ARGV[1]
// holds it; it returns 1 or 0.
var ExtendReentrant = redis.NewScript(extendReentrantSource)
