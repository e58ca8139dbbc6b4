package goredistest

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// RefuseScripts makes c answer every EVALSHA and EVAL with the error a
// Redis 7 ACL user without @scripting gets, without sending it, as a node
// whose operator denied scripts does; everything else goes through.
func RefuseScripts(c *redis.Client) { c.AddHook(refusing{}) }

// NoLua makes c answer as a Valkey 9 without its Lua engine (MODULE
// UNLOAD lua) does: EVALSHA NOSCRIPT, EVAL "ERR Could not find scripting
// engine 'lua'".
func NoLua(c *redis.Client) { c.AddHook(refusing{noLua: true}) }

type refusing struct{ noLua bool }

// noperm is the server's error reply.
type noperm string

func (e noperm) Error() string { return string(e) }
func (noperm) RedisError()     {}

func (r refusing) refuse(cmd redis.Cmder) bool {
	name := cmd.Name()
	switch {
	case r.noLua && name == "evalsha":
		cmd.SetErr(noperm("NOSCRIPT No matching script."))
		return true
	case r.noLua && name == "eval":
		cmd.SetErr(noperm("ERR Could not find scripting engine 'lua'"))
		return true
	case name == "evalsha" || name == "eval":
		cmd.SetErr(noperm(fmt.Sprintf("NOPERM User redlock has no permissions to run the '%s' command", name)))
		return true
	}
	return false
}

func (refusing) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r refusing) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if r.refuse(cmd) {
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (r refusing) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		rest := make([]redis.Cmder, 0, len(cmds))
		for _, c := range cmds {
			if !r.refuse(c) {
				rest = append(rest, c)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return next(ctx, rest)
	}
}
