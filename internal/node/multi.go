package node

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/scripts"
)

// Multi-name locks: one token on several names, taken, extended and
// released on each node in one script, all names or none (see
// acquire_multi.lua). The operations are Acquire, Extend and Release with
// Also set; the names share one layout, since a Redis Cluster node needs
// them in one hash slot (see SameSlot), and keep nothing beside them.

// allKeys is name followed by also.
func allKeys(name string, also []string) []string {
	if len(also) == 0 {
		return []string{name}
	}
	return append([]string{name}, also...)
}

// encodeMulti is the command of a multi-name acquisition.
func (o *Acquire) encodeMulti(ctx context.Context) redis.Cmder {
	args := o.enc.args(Layout{}, func() []any {
		return evalArgs(scripts.AcquireMulti, allKeys(o.Key, o.Also), o.Token, o.TTL.Milliseconds(), o.MinUptime)
	})
	return shared(ctx, args)
}

// encodeMulti is the command of a multi-name release.
func (o *Release) encodeMulti(ctx context.Context) redis.Cmder {
	args := o.enc.args(Layout{}, func() []any {
		prefix := ""
		if o.Channel != "" {
			prefix = ChannelPrefix
		}
		return evalArgs(scripts.ReleaseMulti, allKeys(o.Key, o.Also), o.Token, prefix)
	})
	return shared(ctx, args)
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
