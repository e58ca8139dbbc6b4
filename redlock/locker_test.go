package redlock

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLocker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, fs := newFakeRedlock(t, 3)
		m := newFakeMutex(t, r, "k")
		var errs []error
		l := m.Locker(func(err error) { errs = append(errs, err) })
		l.Lock()
		synctest.Wait()
		assert.Equal(t, 3, keyOn(fs, "k"))
		l.Unlock()
		assert.Empty(t, errs)
		l.Unlock()
		require.Len(t, errs, 1)
		assert.ErrorIs(t, errs[0], ErrNotHeld)

		require.NoError(t, r.Close(t.Context()))
		assert.PanicsWithError(t, ErrClosed.Error(), l.Lock, "a closed Redlock can never lock")
	})
}
