package report_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/redlock/report"
)

// TestNodeErrorsNamesEachNodeOnce: a wait's error may hold two attempts'
// node errors (its last, and the last that could tell); a node that
// failed in both is named once, by the first found.
func TestNodeErrorsNamesEachNodeOnce(t *testing.T) {
	broken := errors.New("broken")
	last := errors.Join(errors.New("not acquired"), &report.NodeError{Index: 1, Err: broken})
	told := fmt.Errorf("held, as the last attempt that could tell found: %w",
		errors.Join(&report.NodeError{Index: 0, Err: broken}, &report.NodeError{Index: 1, Err: report.ErrNodeTimeout}))
	var got []string
	for _, ne := range report.NodeErrors(errors.Join(last, told)) {
		got = append(got, fmt.Sprintf("%d %v", ne.Index, ne.Err))
	}
	assert.Equal(t, []string{"1 broken", "0 broken"}, got)
}
