package sim

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The truth the verdicts are checked against (see verdicts_check.go): which node
// holds which token, and until when, read from the simulated nodes' own
// state on the simulator's true clock, never from what the library says.
//
// A token is known by its first sender: the library draws each one (a
// UUID) in one client and sends it before any other client can have read
// it from a node, so the client whose request first carried it owns it.
// Each client's workers hold names no other worker of it holds, so a
// token of client c on a name is the token of that name's worker in c.

// tokens records every token the clients sent: who first sent it, and when.
type tokens struct {
	mu    sync.Mutex
	owner map[string]tokenSeen
	// per token, how many requests carrying it reached each node
	frames map[string][]int
}

type tokenSeen struct {
	client int
	at     time.Time
}

func newTokens() *tokens { return &tokens{owner: map[string]tokenSeen{}} }

// saw records the tokens in a request frame client c sent.
func (t *tokens) saw(c int, frame []byte) {
	var found []string
	scanUUIDs(frame, func(u string) { found = append(found, u) })
	if len(found) == 0 {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, u := range found {
		if _, ok := t.owner[u]; !ok {
			t.owner[u] = tokenSeen{client: c, at: now}
		}
	}
}

// of returns who first sent token u; false when no client did.
func (t *tokens) of(u string) (tokenSeen, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.owner[u]
	return s, ok
}

// scanUUIDs calls f with each UUID in its text form (8-4-4-4-12 hex digits)
// in b, the shape of the library's tokens.
func scanUUIDs(b []byte, f func(string)) {
	for i := 8; i+28 <= len(b); i++ {
		if b[i] != '-' || b[i+5] != '-' || b[i+10] != '-' || b[i+15] != '-' {
			continue
		}
		u := b[i-8 : i+28]
		if isUUID(u) {
			f(string(u))
			i += 27
		}
	}
}

func isUUID(u []byte) bool {
	for k, ch := range u {
		switch k {
		case 8, 13, 18, 23:
			if ch != '-' {
				return false
			}
		default:
			if (ch < '0' || ch > '9') && (ch < 'a' || ch > 'f') {
				return false
			}
		}
	}
	return true
}

// A grip is a token a node holds on a key, and until when, on the true
// clock.
type grip struct {
	token string
	until time.Time
}

// grips returns the live tokens node i holds on key, whatever the kind of
// lock: a plain lock's or a writer's string (its value), a reentrant lock's
// hash (its owner field, for the key's TTL), readers' hash and a
// semaphore's sorted set (one entry per token, which expires at its value
// or score, in milliseconds of the node's clock). A down node's data counts
// as it will come back (it keeps its keys unless it restarts empty, a fault
// of its own); its TTLs run while it is down, as a real server's do.
func (n *node) grips(key string) []grip {
	n.mu.Lock()
	m, clock := n.m, n.nodeNow()
	n.mu.Unlock()
	now := time.Now()
	ttl := m.TTL(key) // 0 for no expiry: then no lock's
	if ttl <= 0 {
		return nil
	}
	keyUntil := now.Add(ttl)
	var out []grip
	add := func(s string, until time.Time) {
		scanUUIDs([]byte(s), func(u string) { out = append(out, grip{u, minTime(until, keyUntil)}) })
	}
	// entry converts an entry's expiry in node milliseconds to true time.
	entry := func(ms float64) time.Time {
		return now.Add(time.Duration(ms)*time.Millisecond - time.Duration(clock.UnixMilli())*time.Millisecond)
	}
	switch m.Type(key) {
	case "string":
		v, _ := m.Get(key)
		add(v, keyUntil)
	case "hash":
		fields, _ := m.HKeys(key)
		readers := m.HGet(key, "redlock:readers") != ""
		for _, f := range fields {
			if !readers {
				add(f, keyUntil)
				continue
			}
			if ms, err := strconv.ParseFloat(m.HGet(key, f), 64); err == nil {
				add(f, entry(ms))
			}
		}
	case "zset":
		members, _ := m.ZMembers(key)
		for _, u := range members {
			if ms, err := m.ZScore(key, u); err == nil {
				add(u, entry(ms))
			}
		}
	}
	live := out[:0]
	for _, g := range out {
		if g.until.After(now) {
			live = append(live, g)
		}
	}
	return live
}

// nodeNow is the node's clock: true time, or the time set when its clock
// is off (updated every 5 ms, see runClocks). Called with n.mu held.
func (n *node) nodeNow() time.Time {
	if n.offset == 0 {
		return time.Now()
	}
	return n.clockSet
}

// holding returns, for each node, when its hold of token on key ends on
// the true clock (the zero time when it holds none).
func (s *Sim) holding(key, token string) []time.Time {
	out := make([]time.Time, len(s.nodes))
	for i, n := range s.nodes {
		for _, g := range n.grips(key) {
			if g.token == token {
				out[i] = g.until
			}
		}
	}
	return out
}

// tokenOf returns the token of client c's hold of key acquired by a call
// that began at attempt: of the tokens c first sent since then, the one
// the most nodes hold; "" when the nodes hold none (a hold already lost).
func (s *Sim) tokenOf(key string, c int, attempt time.Time) string {
	count := map[string]int{}
	best := ""
	for _, n := range s.nodes {
		for _, g := range n.grips(key) {
			if seen, ok := s.tokens.of(g.token); ok && seen.client == c && !seen.at.Before(attempt) {
				count[g.token]++
				if count[g.token] > count[best] || count[g.token] == count[best] && g.token < best {
					best = g.token
				}
			}
		}
	}
	return best
}

// competitor returns how many nodes the token of another client than c
// that the most nodes hold on key holds.
func (s *Sim) competitor(key string, c int) int {
	count := map[string]int{}
	most := 0
	for _, n := range s.nodes {
		for _, g := range n.grips(key) {
			if seen, ok := s.tokens.of(g.token); ok && seen.client == c {
				continue
			}
			count[g.token]++
			most = max(most, count[g.token])
		}
	}
	return most
}

// reached records that node i received frame: how many requests carrying
// each token reached each node (a request the client resent after its
// reply was lost reaches the node twice, see Sim.release).
func (t *tokens) reached(i int, frame []byte) {
	scanUUIDs(frame, func(u string) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.frames == nil {
			t.frames = map[string][]int{}
		}
		n := t.frames[u]
		if n == nil {
			n = make([]int, i+1, max(i+1, 5))
		}
		for len(n) <= i {
			n = append(n, 0)
		}
		n[i]++
		t.frames[u] = n
	})
}

// reachedCounts returns how many requests carrying token u reached each
// of n nodes so far.
func (t *tokens) reachedCounts(u string, n int) []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int, n)
	copy(out, t.frames[u])
	return out
}

// A sighting is a token of client that node held, on the true clock,
// from first to last (the requests that named its name in between found
// it there).
type sighting struct {
	client, node int
	token        string
	sent         time.Time // when the client first sent the token
	first, last  time.Time
}

// sight records, before node i applies frame, which tokens the nodes
// hold on a watched name (see watch): an attempt's keys, even one that
// failed afterwards (its fence round failed, its grants came too late)
// and undid them. Every change of a name's keys is a request that names
// it, so the state before each such request is every state its keys pass
// through, save the last (read at the refusal's return, see refused).
func (s *Sim) sight(frame []byte) {
	for _, name := range s.watched {
		if !bytes.Contains(frame, name.arg) {
			continue
		}
		for i, n := range s.nodes {
			for _, g := range n.grips(name.key) {
				if seen, ok := s.tokens.of(g.token); ok {
					s.hist.sighted(name.key, sighting{client: seen.client, node: i, token: g.token, sent: seen.at, first: time.Now(), last: time.Now()})
				}
			}
		}
	}
}

// A watchedName is a name whose refusals are judged: its key, and how a
// request names it.
type watchedName struct {
	key string
	arg []byte
}

// watch makes sight follow name. Called before the run starts.
func (s *Sim) watch(name string) {
	if slices.ContainsFunc(s.watched, func(w watchedName) bool { return w.key == name }) {
		return
	}
	s.watched = append(s.watched, watchedName{key: name, arg: fmt.Appendf(nil, "$%d\r\n%s\r\n", len(name), name)})
}
