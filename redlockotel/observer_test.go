package redlockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
	"github.com/redlock-go/redlock/redlockotel"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setup returns a Redlock over n miniredis servers observed by a
// redlockotel Observer, with the reader and recorder it reports to.
type setup struct {
	servers []*miniredis.Miniredis
	rl      *redlock.Redlock
	obs     *redlockotel.Observer
	reader  *sdkmetric.ManualReader
	spans   *tracetest.SpanRecorder
	tp      *sdktrace.TracerProvider
}

func newSetup(t *testing.T, n int, opts ...redlockotel.Option) *setup {
	t.Helper()
	s := &setup{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = s.tp.Shutdown(context.Background())
	})
	obs, err := redlockotel.NewObserver(append([]redlockotel.Option{
		redlockotel.WithMeterProvider(mp), redlockotel.WithTracerProvider(s.tp),
	}, opts...)...)
	require.NoError(t, err)
	s.obs = obs
	clients := make([]redis.UniversalClient, n)
	for i := range n {
		srv := miniredis.RunT(t)
		s.servers = append(s.servers, srv)
		// One try per command and dial: a stopped server fails at once.
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	rl, err := redlock.New(clients, redlock.WithObserver(obs), redlock.WithRetryDelay(5*time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, rl.Close(context.Background())) })
	s.rl = rl
	return s
}

// collect returns the metrics collected now, by name.
func (s *setup) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, redlockotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// histogram returns the points of a float64 histogram by the value of key.
func histogram(t *testing.T, m metricdata.Metrics, key attribute.Key) map[string]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a float64 histogram, got %T", m.Name, m.Data)
	out := map[string]metricdata.HistogramDataPoint[float64]{}
	for _, p := range h.DataPoints {
		v, _ := p.Attributes.Value(key)
		out[v.AsString()] = p
	}
	return out
}

// sums returns the points of an int64 sum by their attribute sets.
func sums(t *testing.T, m metricdata.Metrics) []metricdata.DataPoint[int64] {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is an int64 sum, got %T", m.Name, m.Data)
	return s.DataPoints
}

func attr(set attribute.Set, key attribute.Key) string {
	v, _ := set.Value(key)
	return v.String()
}

func TestObserverMetrics(t *testing.T) {
	s := newSetup(t, 3)
	ctx := t.Context()
	// The node timeout is far above a loaded machine's round trips: the
	// test counts attempts, and asserts below that no node failed (at the
	// default 100 ms, `make test` beside other work failed both now and
	// then).
	near := redlock.WithNodeTimeout(time.Second)
	holder, err := s.rl.NewMutex("metrics:a", near)
	require.NoError(t, err)
	other, err := s.rl.NewMutex("metrics:a", redlock.WithTries(2), near)
	require.NoError(t, err)

	require.NoError(t, holder.Lock(ctx))
	require.ErrorIs(t, other.TryLock(ctx), redlock.ErrNotAcquired)
	require.ErrorIs(t, other.Lock(ctx), redlock.ErrNotAcquired) // two attempts
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	loose, err := s.rl.NewMutex("metrics:a", near)
	require.NoError(t, err)
	require.ErrorIs(t, loose.Lock(short), context.DeadlineExceeded)
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, holder.Unlock(ctx))
	require.NoError(t, holder.Lock(ctx)) // a second hold, unlocked at once
	require.NoError(t, holder.Unlock(ctx))

	// A lock never extended is lost TTL/20 before its validity ends.
	// The node timeout is far above a loaded machine's round trips: the
	// test asserts below that no node failed.
	brief, err := s.rl.NewMutex("metrics:b", redlock.WithTTL(time.Second), redlock.WithNodeTimeout(250*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, brief.Lock(ctx))
	<-brief.Done()
	require.ErrorIs(t, brief.Err(), redlock.ErrLockLost)

	got := s.collect(t)
	acq := got["redlock.acquire.duration"]
	assert.Equal(t, "s", acq.Unit)
	points := histogram(t, acq, redlockotel.OutcomeKey)
	require.Len(t, points, 3, "acquired, not_acquired, canceled: %v", points)
	assert.Equal(t, uint64(3), points["acquired"].Count, "holder twice, and brief")
	assert.Equal(t, uint64(2), points["not_acquired"].Count, "one per call, not per attempt")
	assert.Equal(t, uint64(1), points["canceled"].Count)
	assert.GreaterOrEqual(t, points["canceled"].Sum, 0.025, "the canceled Lock waited out its context")
	for _, p := range points {
		assert.Equal(t, 1, p.Attributes.Len(), "no lock name by default")
	}

	attempts, ok := got["redlock.acquire.attempts"].Data.(metricdata.Histogram[int64])
	require.True(t, ok)
	byOutcome := map[string]int64{}
	for _, p := range attempts.DataPoints {
		byOutcome[attr(p.Attributes, redlockotel.OutcomeKey)] = p.Sum
	}
	assert.Equal(t, int64(3), byOutcome["acquired"])
	assert.Equal(t, int64(3), byOutcome["not_acquired"], "TryLock 1 + Lock 2")

	active := sums(t, got["redlock.acquire.active"])
	require.Len(t, active, 1)
	assert.Equal(t, int64(0), active[0].Value, "every call returned")

	hold := histogram(t, got["redlock.hold.duration"], redlockotel.EndKey)
	assert.Equal(t, "s", got["redlock.hold.duration"].Unit)
	assert.Equal(t, uint64(2), hold["unlocked"].Count)
	assert.GreaterOrEqual(t, hold["unlocked"].Sum, 0.020, "held from the attempt to Unlock")
	assert.Equal(t, uint64(1), hold["lost"].Count)
	// 1 s - drift (1% + 2 ms) - TTL/20
	assert.InDelta(t, 0.938, hold["lost"].Sum, 0.03, "lost at the validity's end minus TTL/20")

	lost := sums(t, got["redlock.lost"])
	require.Len(t, lost, 1)
	assert.Equal(t, int64(1), lost[0].Value, "brief only")
	_, hasErrors := got["redlock.node.errors"]
	assert.False(t, hasErrors, "no node failed")
}

func TestObserverNodeErrors(t *testing.T) {
	s := newSetup(t, 3)
	ctx := t.Context()
	stopped := s.servers[2].Addr()
	s.servers[2].Close()
	mu, err := s.rl.NewMutex("node-errors")
	require.NoError(t, err)
	require.NoError(t, mu.Lock(ctx))   // refused: the node goes down
	require.NoError(t, mu.Unlock(ctx)) // skipped: down

	got := s.collect(t)
	errs := sums(t, got["redlock.node.errors"])
	byType := map[string]int64{}
	for _, p := range errs {
		assert.Equal(t, stopped, attr(p.Attributes, redlockotel.ServerAddressKey))
		byType[attr(p.Attributes, redlockotel.ErrorTypeKey)] += p.Value
	}
	assert.Equal(t, int64(1), byType["network"], "the refused connection: %v", byType)
	assert.GreaterOrEqual(t, byType["node_down"], int64(1), "then skipped: %v", byType)
}

// A call reported at its timeout and again, late, with the error it ended
// with is counted once.
func TestObserverNodeErrorsLateCountedOnce(t *testing.T) {
	s := newSetup(t, 3)
	s.obs.NodeFailed(t.Context(), &report.NodeError{Index: 1, Addr: "n1", Err: report.ErrNodeTimeout})
	s.obs.NodeFailed(t.Context(), &report.NodeError{Index: 1, Addr: "n1", Err: errors.New("dial refused"), Late: true})
	var total int64
	for _, p := range sums(t, s.collect(t)["redlock.node.errors"]) {
		total += p.Value
	}
	assert.Equal(t, int64(1), total)
}

func TestObserverSpans(t *testing.T) {
	s := newSetup(t, 3)
	parentCtx, parent := s.tp.Tracer("test").Start(t.Context(), "job")
	s.servers[0].Close()
	mu, err := s.rl.NewMutex("spans", redlock.WithTTL(600*time.Millisecond), redlock.WithRenewal())
	require.NoError(t, err)
	other, err := s.rl.NewMutex("spans")
	require.NoError(t, err)

	require.NoError(t, mu.Lock(parentCtx))
	require.ErrorIs(t, other.TryLock(parentCtx), redlock.ErrNotAcquired)
	require.NoError(t, mu.Extend(parentCtx))
	time.Sleep(250 * time.Millisecond) // one renewal, at TTL/3
	require.NoError(t, mu.Unlock(parentCtx))
	parent.End()

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, sp := range s.spans.Ended() {
		byName[sp.Name()] = append(byName[sp.Name()], sp)
	}
	for _, name := range []string{"redlock.Lock", "redlock.TryLock", "redlock.Unlock"} {
		require.Len(t, byName[name], 1, name)
	}
	require.Len(t, byName["redlock.Extend"], 2, "the call and the renewal")
	for name, spans := range byName {
		if name == "job" {
			continue
		}
		for _, sp := range spans {
			assert.Equal(t, parent.SpanContext().SpanID(), sp.Parent().SpanID(), "%s is a child of the caller's span", name)
			assert.Equal(t, "spans", attrOf(sp, redlockotel.LockNameKey).AsString())
		}
	}

	lock := byName["redlock.Lock"][0]
	assert.Equal(t, "acquired", attrOf(lock, redlockotel.OutcomeKey).AsString())
	assert.Equal(t, int64(1), attrOf(lock, redlockotel.AttemptsKey).AsInt64())
	assert.Equal(t, codes.Unset, lock.Status().Code)
	require.NotEmpty(t, lock.Events(), "node 0 failed during Lock")
	ev := lock.Events()[0]
	assert.Equal(t, "redlock.node.error", ev.Name)
	evAttrs := attribute.NewSet(ev.Attributes...)
	assert.Equal(t, int64(0), attrValue(evAttrs, redlockotel.NodeIndexKey).AsInt64())
	// The Lock's own dial is refused, or one before it (the node is then
	// down at once, see redlock.WithLogger): either is node 0's failure.
	assert.Contains(t, []string{"network", "node_down"}, attrValue(evAttrs, redlockotel.ErrorTypeKey).AsString())

	try := byName["redlock.TryLock"][0]
	assert.Equal(t, "not_acquired", attrOf(try, redlockotel.OutcomeKey).AsString())
	assert.Equal(t, codes.Error, try.Status().Code)
	assert.Contains(t, try.Status().Description, "lock not acquired")

	renewals := 0
	for _, sp := range byName["redlock.Extend"] {
		assert.Equal(t, "extended", attrOf(sp, redlockotel.OutcomeKey).AsString())
		if attrOf(sp, redlockotel.RenewalKey).AsBool() {
			renewals++
		}
	}
	assert.Equal(t, 1, renewals)
	assert.Equal(t, "unlocked", attrOf(byName["redlock.Unlock"][0], redlockotel.OutcomeKey).AsString())
}

func TestObserverLockNameAttribute(t *testing.T) {
	s := newSetup(t, 3, redlockotel.WithLockNameAttribute())
	mu, err := s.rl.NewMutex("named")
	require.NoError(t, err)
	require.NoError(t, mu.Lock(t.Context()))
	require.NoError(t, mu.Unlock(t.Context()))
	got := s.collect(t)
	for _, name := range []string{"redlock.acquire.duration", "redlock.hold.duration"} {
		for _, p := range got[name].Data.(metricdata.Histogram[float64]).DataPoints {
			assert.Equal(t, "named", attr(p.Attributes, redlockotel.LockNameKey), name)
		}
	}
}

func TestObserveHealth(t *testing.T) {
	s := newSetup(t, 3)
	reg, err := s.obs.ObserveHealth(s.rl)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, reg.Unregister()) })
	addrs := []string{s.servers[0].Addr(), s.servers[1].Addr(), s.servers[2].Addr()}
	s.servers[1].Close()
	mu, err := s.rl.NewMutex("health")
	require.NoError(t, err)
	require.NoError(t, mu.Lock(t.Context()))

	got := s.collect(t)
	gauge, ok := got["redlock.node.up"].Data.(metricdata.Gauge[int64])
	require.True(t, ok)
	up := map[string]int64{}
	for _, p := range gauge.DataPoints {
		up[attr(p.Attributes, redlockotel.ServerAddressKey)] = p.Value
	}
	require.Len(t, up, 3)
	assert.Equal(t, map[string]int64{addrs[0]: 1, addrs[1]: 0, addrs[2]: 1}, up)
	_, ok = got["redlock.node.owed_releases"].Data.(metricdata.Gauge[int64])
	assert.True(t, ok)
}

func TestErrorType(t *testing.T) {
	for want, err := range map[string]error{
		"timeout":       report.ErrNodeTimeout,
		"node_down":     errors.Join(report.ErrNodeDown, report.ErrNodeTimeout),
		"misconfigured": redlock.ErrMisconfigured,
		"recovering":    report.ErrNodeRecovering,
		"LOADING":       replyError("LOADING Redis is loading the dataset in memory"),
		"ERR":           replyError("ERR user_script:1: boom"),
		"not_sent":      errors.New("redlock: request not sent: the node timeout passed in the queue"),
		"_OTHER":        errors.New("something else"),
	} {
		assert.Equal(t, want, redlockotel.ErrorType(err), err.Error())
	}
}

func attrOf(sp sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	return attrValue(attribute.NewSet(sp.Attributes()...), key)
}

func attrValue(set attribute.Set, key attribute.Key) attribute.Value {
	v, _ := set.Value(key)
	return v
}

// replyError is an error reply from a server, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}
