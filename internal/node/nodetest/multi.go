package nodetest

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// Multi-name locks (node.Multi): an Acquire, Extend or Release takes,
// extends or releases every name or none (acquire_multi.lua,
// extend_multi.lua, release_multi.lua). The extension is in extend.

// grantAll is acquire_multi.lua: the first name held by another (or of
// another kind) refuses, and nothing is set. Called with n.mu held.
func (n *Fake) grantAll(r *node.Acquire) (bool, string, error) {
	keys := append([]string{r.Key}, r.Also...)
	for _, k := range keys {
		switch kind := n.kind(k); kind {
		case kindZset:
			return false, "", notALock(k, kind)
		case kindHash, kindReaders:
			return false, "", nil
		case kindString:
			if v := n.Data[k].Value; v != r.Token {
				return false, v, nil
			}
		}
	}
	for _, k := range keys {
		n.Data[k] = Entry{Value: r.Token, Expires: time.Now().Add(r.TTL), Holds: 1}
	}
	return true, "", nil
}

// releaseAll is release_multi.lua: it deletes the names that hold the
// token and announces each name on its own channel, naming no waiter; a
// release that deleted none is refused when a name is held by another,
// and finds the lock gone otherwise. Called with n.mu held.
func (n *Fake) releaseAll(r *node.Release) (ok bool, heard int, gone bool) {
	keys := append([]string{r.Key}, r.Also...)
	deleted, taken := 0, false
	for _, k := range keys {
		e, held := n.entry(k)
		switch {
		case held && !e.Hash && e.Value == r.Token:
			delete(n.Data, k)
			deleted++
		case held || n.kind(k) != kindNone:
			taken = true
		}
	}
	if deleted == 0 {
		return false, 0, !taken
	}
	if r.Channel != "" {
		for _, k := range keys {
			heard += 2 * n.publish(node.ReleaseChannel(k), node.Notice{ID: r.Token}.String())
		}
	}
	return true, heard, false
}
