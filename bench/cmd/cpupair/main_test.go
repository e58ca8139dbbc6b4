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

// perOp counts what the longer run cost beyond the shorter one: a set-up
// that costs both runs the same counts in no figure.
func TestPerOpLeavesSetUpOut(t *testing.T) {
	const setUp, each = 0.25, 50e-6 // seconds
	run := func(ops float64) sample {
		return sample{
			client: setUp + ops*each, servers: 0.1 + ops*2*each,
			calls: map[string]float64{"evalsha": 30 + ops, "script|load": 30},
			usec:  map[string]float64{"evalsha": 90 + ops*4, "script|load": 300},
		}
	}
	m := measurement{calls: map[string]float64{}, usec: map[string]float64{}}
	m.perOp(run(20001), run(1), 20000)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"client µs", m.client, 50}, {"servers µs", m.servers, 100},
		{"EVALSHA calls", m.calls["evalsha"], 1}, {"EVALSHA µs", m.usec["evalsha"], 4},
		{"SCRIPT LOAD calls", m.calls["script|load"], 0},
	} {
		if c.got < c.want-1e-6 || c.got > c.want+1e-6 {
			t.Errorf("%s per op = %v, want %v", c.name, c.got, c.want)
		}
	}
}
