package node

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Multi-name locks: one token on several names, taken, extended and
// released on each node in one script, all names or none (see
// acquire_multi.lua). The names share one layout, since a Redis Cluster
// node needs them in one hash slot (see SameSlot), and keep nothing beside
// them. They need scripts.

// MultiAcquire takes Key and the names Also for Token, all or none, as
// Acquire takes one name: the first name held by another refuses, naming
// its holder where it can.
type MultiAcquire struct {
	Key   string
	Also  []string
	Token string
	TTL   time.Duration
	// MinUptime and Ack are as in Acquire.
	MinUptime int64
	Ack       Ack
	enc       encoding
}

// Name implements Op.
func (*MultiAcquire) Name() string { return "multi acquire" }

// Lane implements Laned: the lock's first name.
func (o *MultiAcquire) Lane() string { return o.Key }

// Encode implements Op.
func (o *MultiAcquire) Encode(ctx context.Context, _ Layout, cmds []redis.Cmder) []redis.Cmder {
	args := o.enc.args(Layout{}, func() []any {
		return evalArgs(scripts.AcquireMulti, allKeys(o.Key, o.Also), o.Token, o.TTL.Milliseconds(), o.MinUptime)
	})
	return o.Ack.encode(ctx, append(cmds, shared(ctx, args)))
}

// Decode implements Op: as acquire_plain.lua's reply, or, for a node that
// restarted too recently, as acquire.lua's.
func (o *MultiAcquire) Decode(cmds []redis.Cmder) Reply {
	cmd := cmds[0].(*redis.Cmd)
	if _, ok := cmd.Val().([]any); ok {
		return o.Ack.check(cmds, decodeGrant(cmd, o.MinUptime, ""))
	}
	return o.Ack.check(cmds, decodeHolder(cmd))
}

// allKeys is name followed by also.
func allKeys(name string, also []string) []string {
	if len(also) == 0 {
		return []string{name}
	}
	return append([]string{name}, also...)
}

// SameSlot reports whether every name hashes to one Redis Cluster slot, as
// a script's keys must there.
func SameSlot(names []string) bool {
	for _, n := range names[1:] {
		if Slot(n) != Slot(names[0]) {
			return false
		}
	}
	return true
}

// Slot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash
// tag, the part between the first "{" and the next "}" when not empty, or
// of the whole key, modulo 16384.
func Slot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := range len(key) {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
