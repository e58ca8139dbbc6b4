package sim

import (
	"bufio"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A link between sites delays each frame by their one-way delay, both
// ways, and a pipeline keeps its spacing: two requests sent together are
// answered one round trip later, not two.
func TestSitesDelayFrames(t *testing.T) {
	for _, tc := range []struct {
		client, node int
		trip         time.Duration
	}{
		{0, 4, 60 * time.Millisecond}, // A to C
		{1, 4, 40 * time.Millisecond}, // B to C
		{0, 1, 0},                     // within A
	} {
		synctest.Test(t, func(t *testing.T) {
			cfg := Config{Seed: 1, Nodes: 5, Clients: 3, ClusterLike: make([]bool, 5), Sites: true, TTL: time.Second}
			s := &Sim{cfg: cfg, seed: 1, hist: newHistory(), log: &eventLog{}, trace: newTrace(5, false), tokens: newTokens(),
				cut: map[[2]int]bool{}, frozen: map[int]chan struct{}{}, onSend: map[int]time.Duration{}, dials: map[[2]int]int{}, seen: map[uint64]int{}}
			for i := range 5 {
				s.nodes = append(s.nodes, newNode(s, i))
			}
			c, err := s.dial(tc.client, tc.node)
			require.NoError(t, err)
			start := time.Now()
			_, err = c.Write([]byte("*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n"))
			require.NoError(t, err)
			r := bufio.NewReader(c)
			for range 2 {
				line, err := r.ReadString('\n')
				require.NoError(t, err)
				assert.Equal(t, "+PONG\r\n", line)
			}
			took := time.Since(start)
			assert.GreaterOrEqual(t, took, tc.trip, "client %d to node %d", tc.client, tc.node)
			assert.Less(t, took, tc.trip+time.Millisecond, "client %d to node %d: a pipeline is not serialised", tc.client, tc.node)
			_ = c.Close()
			for _, n := range s.nodes {
				n.close()
			}
			s.linked.Wait()
		})
	}
}
