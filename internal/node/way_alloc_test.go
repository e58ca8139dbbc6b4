package node

import "testing"

// Every reply is checked for a refusal of scripts: a reply without an
// error must cost nothing (errors.As's target escapes, so it is made only
// for an error).
func TestScriptsRefusedCostsNothingWithoutError(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = scriptsRefused(nil) }); n != 0 {
		t.Fatalf("scriptsRefused(nil) allocates %v times", n)
	}
}

// A server's error reply, or a client's own error, is read without
// allocating unless it wraps others.
func TestReplyOfCostsNothingUnwrapped(t *testing.T) {
	for _, err := range []error{nil, ErrNil, ServerError("NOSCRIPT x"), ErrUnsent} {
		if n := testing.AllocsPerRun(100, func() { _, _ = replyOf(err) }); n != 0 {
			t.Fatalf("replyOf(%v) allocates %v times", err, n)
		}
	}
}
