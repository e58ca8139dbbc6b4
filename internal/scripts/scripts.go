// Package scripts holds the Lua scripts the lock runs on each Redis node.
// Each script is a .lua file beside this one, embedded at build time and
// wrapped once in a redis.Script (EVALSHA, falling back to EVAL when a node
// does not have the script cached yet).
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
)

// Release deletes KEYS[1] if it holds ARGV[1]; it returns 1 or 0.
var Release = redis.NewScript(releaseSource)

// Extend sets KEYS[1]'s expiry to ARGV[2] ms if it holds ARGV[1]; it returns 1 or 0.
var Extend = redis.NewScript(extendSource)
