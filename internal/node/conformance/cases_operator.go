package conformance

import (
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

// The operator's operations, Inspect and the forced Release (Shape Any),
// on each kind of name (see Cases).

func inspect(k string) *node.Inspect { return &node.Inspect{Key: k} }

func inspected(st state) answer { return answer{OK: true, State: st} }

func operatorCases() []Case {
	return []Case{
		{"inspect and force a plain and a reentrant lock", nil, func(k string) []step {
			return []step{
				{op: inspect(k), want: granted},
				{op: fenced(k, "a"), want: granted},
				{op: fence(k, "a", 3), want: granted},
				wait(2 * time.Second),
				{op: inspect(k), want: inspected(state{Held: true, Holder: "a", Holds: 1, Counter: 3, TTL: 8 * time.Second})},
				{op: &node.Release{Shape: node.Any, Key: k, Notice: "n"}, want: answer{OK: true, Holder: "a"}},
				{op: &node.Release{Shape: node.Any, Key: k, Notice: "n"}, want: refused},
				{op: reentrant(k, "o", false), want: granted},
				{op: reentrant(k, "o", true), want: granted},
				{op: inspect(k), want: inspected(state{Held: true, Reentrant: true, Holder: "o", Holds: 2, Counter: 3, TTL: ttl})},
				{listen: true},
				{op: &node.Release{Shape: node.Any, Key: k, Notice: "n"}, want: answer{OK: true, Holder: "o", Reentrant: true, Heard: 1}},
				{op: inspect(k), want: inspected(state{Counter: 3})},
			}
		}},
		{"inspect and force a semaphore", nil, func(k string) []step {
			return []step{
				{op: sem(k, "a", 3), want: granted},
				wait(time.Second),
				{op: sem(k, "b", 3), want: granted},
				{op: inspect(k), want: inspected(state{Semaphore: true, Permits: 3, Holders: []string{"a/9s", "b/10s"}})},
				{op: &node.Release{Shape: node.Any, Key: k, Notice: "n"}, want: answer{OK: true, Holder: "a"}},
				{op: inspect(k), want: granted},
				{op: sem(k, "c", 1), want: granted},
			}
		}},
		{"inspect and force the readers", nil, func(k string) []step {
			return []step{
				{op: read(k, "r1"), want: granted},
				{op: inspect(k), want: inspected(state{Readers: true, Holders: []string{"r1/10s"}})}, // no TTL for readers
				{op: write(k, "w", "t"), want: refused},
				{op: &node.Release{Shape: node.Any, Key: k, Notice: "n"}, want: answer{OK: true, Holder: "r1"}},
				{op: read(k, "r2"), want: writerWaits}, // the writer's mark stays
				{op: write(k, "w", "t"), want: granted},
				{op: inspect(k), want: inspected(state{Held: true, Holder: "t", Holds: 1, TTL: ttl})},
			}
		}},
	}
}
