package main

import (
	"os"
	"testing"
)

func TestPattern(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"redlock-go/64", "^BenchmarkPair$/^redlock-go$/^goroutines=64$"},
		{"redlock-go_semaphore_(3_permits)/1", `^BenchmarkPair$/^redlock-go_semaphore_\(3_permits\)$/^goroutines=1$`},
		{"^BenchmarkHandoff$/^redlock-go$", "^BenchmarkHandoff$/^redlock-go$"},
		{"BenchmarkPair/redsync/goroutines=64", "BenchmarkPair/redsync/goroutines=64"},
		{"BenchmarkContended", "BenchmarkContended"},
	} {
		if got := pattern(c.in); got != c.want {
			t.Errorf("pattern(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// procCPU reads this process's own CPU, which a busy loop raises.
func TestProcCPU(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x, after := 0, before
	for range 1000 { // bounded: a reading that never moves fails below
		for i := range 10_000_000 {
			x += i
		}
		if after, err = procCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if after >= before+0.05 {
			break
		}
	}
	if after < before+0.05 {
		t.Errorf("CPU %v s, then %v s after a busy loop", before, after)
	}
	_ = x
}
