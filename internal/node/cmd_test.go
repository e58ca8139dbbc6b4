package node

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reply reads the same whichever protocol carried it: CONFIG GET as a
// RESP3 map or a RESP2 array, TIME as strings or integers.
func TestCmdReadsEitherProtocol(t *testing.T) {
	answered := func(v any) *Cmd {
		c := NewCmd("x")
		c.Answer(v, nil)
		return c
	}
	want := map[string]string{"maxmemory": "0", "appendonly": "yes"}
	m, err := answered(map[any]any{"maxmemory": "0", "appendonly": "yes"}).StrMap()
	require.NoError(t, err)
	assert.Equal(t, want, m)
	m, err = answered([]any{"maxmemory", "0", "appendonly", "yes"}).StrMap()
	require.NoError(t, err)
	assert.Equal(t, want, m)

	at := time.Unix(1700000000, 123456000)
	for _, v := range [][]any{{"1700000000", "123456"}, {int64(1700000000), int64(123456)}} {
		got, err := answered(v).Time()
		require.NoError(t, err)
		assert.True(t, at.Equal(got), "%v", got)
	}
	_, err = answered("OK").Time()
	require.Error(t, err)

	nilReply := NewCmd("get", "k")
	nilReply.Answer(nil, ErrNil)
	s, err := nilReply.Text()
	assert.Empty(t, s)
	assert.ErrorIs(t, err, ErrNil)
	assert.False(t, isReply(err), "a nil reply is no error reply")
}

// A server's error reply is read by its own word, wrapped or not, and
// after the "ERR " some servers put first (KVRocks: "ERR NOSCRIPT ...").
func TestSaysReadsTheServersWord(t *testing.T) {
	noScript := ServerError("NOSCRIPT No matching script. Please use EVAL.")
	assert.True(t, says(noScript, "NOSCRIPT"))
	assert.True(t, says(ServerError("ERR NOSCRIPT No matching script"), "NOSCRIPT"))
	assert.True(t, says(fmt.Errorf("%w: %w", ErrMisconfigured, noScript), "NOSCRIPT"), "wrapped")
	assert.False(t, says(errors.New("NOSCRIPT"), "NOSCRIPT"), "no server's reply: the client's own error")
	assert.True(t, says(ServerError("ERR unknown command 'delifeq'"), "ERR unknown command"))
	assert.False(t, says(ServerError("WRONGTYPE Operation against a key"), "NOSCRIPT"))
}
