package redlockotel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-go/redlock/redlock"
	"github.com/redlock-go/redlock/redlock/report"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/redlock-go/redlock/redlockotel"

// Attribute keys.
const (
	// OutcomeKey is redlock.outcome: acquired, not_acquired or canceled
	// for Lock and TryLock; on spans of Unlock and Extend, unlocked or
	// extended, not_held, lost or canceled.
	OutcomeKey = attribute.Key("redlock.outcome")
	// EndKey is redlock.end: unlocked or lost.
	EndKey = attribute.Key("redlock.end")
	// LockNameKey is redlock.lock.name, the lock's name.
	LockNameKey = attribute.Key("redlock.lock.name")
	// AttemptsKey is redlock.attempts, on spans of Lock and TryLock.
	AttemptsKey = attribute.Key("redlock.attempts")
	// RenewalKey is redlock.renewal, set on spans of extensions by renewal.
	RenewalKey = attribute.Key("redlock.renewal")
	// NodeIndexKey is redlock.node.index, the node's position in the
	// clients given to redlock.New, on node error events.
	NodeIndexKey = attribute.Key("redlock.node.index")
	// ServerAddressKey and ErrorTypeKey are OpenTelemetry's server.address
	// and error.type.
	ServerAddressKey = attribute.Key("server.address")
	ErrorTypeKey     = attribute.Key("error.type")
	errorMessageKey  = attribute.Key("error.message")
)

// The values of redlock.outcome and redlock.end.
const (
	Acquired    = "acquired"
	NotAcquired = "not_acquired"
	Canceled    = "canceled"
	Unlocked    = "unlocked"
	Lost        = "lost"
	extended    = "extended"
	notHeld     = "not_held"
)

// Observer is a [report.Observer] that records OpenTelemetry metrics and
// spans (see the package documentation). Create it with [NewObserver]; one
// Observer may serve any number of Redlocks and mutexes, from any number
// of goroutines.
type Observer struct {
	tracer   trace.Tracer
	meter    metric.Meter
	lockName bool

	acquireDuration metric.Float64Histogram
	acquireAttempts metric.Int64Histogram
	acquireActive   metric.Int64UpDownCounter
	holdDuration    metric.Float64Histogram
	lost            metric.Int64Counter
	nodeErrors      metric.Int64Counter

	// The attribute sets without lock names, built once.
	outcomes map[string]metric.MeasurementOption
	ends     map[string]metric.MeasurementOption
	none     metric.MeasurementOption
}

var _ report.Observer = (*Observer)(nil)

// NewObserver returns an Observer recording to the providers the options
// name, the global ones by default. It returns an error when an instrument
// cannot be created.
func NewObserver(opts ...Option) (*Observer, error) {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	o := &Observer{
		tracer:   c.tp.Tracer(ScopeName),
		meter:    c.mp.Meter(ScopeName),
		lockName: c.lockName,
		outcomes: map[string]metric.MeasurementOption{},
		ends:     map[string]metric.MeasurementOption{},
		none:     metric.WithAttributeSet(attribute.NewSet()),
	}
	var errs []error
	var err error
	o.acquireDuration, err = o.meter.Float64Histogram("redlock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of Lock and TryLock calls, from the call to its return."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	errs = append(errs, err)
	o.acquireAttempts, err = o.meter.Int64Histogram("redlock.acquire.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made by each Lock and TryLock call."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100))
	errs = append(errs, err)
	o.acquireActive, err = o.meter.Int64UpDownCounter("redlock.acquire.active", metric.WithUnit("{call}"),
		metric.WithDescription("Lock and TryLock calls in progress."))
	errs = append(errs, err)
	o.holdDuration, err = o.meter.Float64Histogram("redlock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("How long each acquisition held its lock, until it was unlocked or lost."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600))
	errs = append(errs, err)
	o.lost, err = o.meter.Int64Counter("redlock.lost", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Acquisitions lost before Unlock."))
	errs = append(errs, err)
	o.nodeErrors, err = o.meter.Int64Counter("redlock.node.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Node calls that failed, or answered after the node timeout."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("redlockotel: %w", err)
	}
	for _, v := range []string{Acquired, NotAcquired, Canceled} {
		o.outcomes[v] = metric.WithAttributeSet(attribute.NewSet(OutcomeKey.String(v)))
	}
	for _, v := range []string{Unlocked, Lost} {
		o.ends[v] = metric.WithAttributeSet(attribute.NewSet(EndKey.String(v)))
	}
	return o, nil
}

// started is what OpStart leaves in the context for OpEnd.
type started struct {
	at   time.Time
	span trace.Span
}

type startedKey struct{}

// OpStart starts the call's span, a child of the span in ctx, and notes
// the time. Lock and TryLock count as active until OpEnd.
func (o *Observer) OpStart(ctx context.Context, op report.Op) context.Context {
	attrs := []attribute.KeyValue{LockNameKey.String(op.Name)}
	if op.Renewal {
		attrs = append(attrs, RenewalKey.Bool(true))
	}
	ctx, span := o.tracer.Start(ctx, "redlock."+op.Kind.String(), trace.WithAttributes(attrs...))
	if acquisition(op.Kind) {
		o.acquireActive.Add(ctx, 1, o.nameOr(op.Name, o.none))
	}
	return context.WithValue(ctx, startedKey{}, started{at: time.Now(), span: span})
}

// OpEnd records the call's duration and attempts (Lock and TryLock), and
// ends its span.
func (o *Observer) OpEnd(ctx context.Context, op report.Op, res report.OpResult) {
	s, ok := ctx.Value(startedKey{}).(started)
	if !ok {
		return // not a context of OpStart's
	}
	var outcome string
	if acquisition(op.Kind) {
		outcome = acquireOutcome(res)
		attrs := o.nameOr(op.Name, o.outcomes[outcome], OutcomeKey.String(outcome))
		o.acquireDuration.Record(ctx, time.Since(s.at).Seconds(), attrs)
		o.acquireAttempts.Record(ctx, int64(res.Attempts), attrs)
		o.acquireActive.Add(ctx, -1, o.nameOr(op.Name, o.none))
		s.span.SetAttributes(AttemptsKey.Int(res.Attempts))
	} else {
		outcome = releaseOutcome(op.Kind, res)
	}
	s.span.SetAttributes(OutcomeKey.String(outcome))
	if res.Err != nil {
		s.span.SetStatus(codes.Error, res.Err.Error())
	}
	s.span.End()
}

// LeaseEnd records how long the acquisition held the lock, and counts it
// when it was lost.
func (o *Observer) LeaseEnd(h report.Lease) {
	end := Unlocked
	if h.Lost {
		end = Lost
	}
	ctx := context.Background()
	o.holdDuration.Record(ctx, time.Since(h.Acquired).Seconds(), o.nameOr(h.Name, o.ends[end], EndKey.String(end)))
	if h.Lost {
		o.lost.Add(ctx, 1, o.nameOr(h.Name, o.none))
	}
}

// NodeFailed counts the failure (a late report of a call already counted
// when it timed out is not counted again), and adds an event to the
// operation's span while it lasts.
func (o *Observer) NodeFailed(ctx context.Context, e *report.NodeError) {
	kind := ErrorType(e.Err)
	addr := ServerAddressKey.String(e.Addr)
	if !e.Late { // the call was counted when it timed out
		o.nodeErrors.Add(ctx, 1, metric.WithAttributes(addr, ErrorTypeKey.String(kind)))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("redlock.node.error", trace.WithAttributes(addr, NodeIndexKey.Int(e.Index),
			ErrorTypeKey.String(kind), errorMessageKey.String(e.Err.Error())))
	}
}

// nameOr returns set, or with WithLockNameAttribute the attributes kvs
// with the lock's name.
func (o *Observer) nameOr(name string, set metric.MeasurementOption, kvs ...attribute.KeyValue) metric.MeasurementOption {
	if !o.lockName {
		return set
	}
	return metric.WithAttributes(append(kvs, LockNameKey.String(name))...)
}

func acquisition(k report.OpKind) bool {
	return k == report.OpLock || k == report.OpTryLock || k == report.OpAcquire || k == report.OpTryAcquire ||
		k == report.OpRLock || k == report.OpTryRLock
}

func acquireOutcome(res report.OpResult) string {
	switch {
	case res.Err == nil:
		return Acquired
	case res.Canceled:
		return Canceled
	}
	return NotAcquired
}

func releaseOutcome(k report.OpKind, res report.OpResult) string {
	switch {
	case res.Err == nil && (k == report.OpUnlock || k == report.OpRelease):
		return Unlocked
	case res.Err == nil:
		return extended
	case res.Canceled:
		return Canceled
	case errors.Is(res.Err, redlock.ErrLockLost):
		return Lost
	}
	return notHeld
}

// ErrorType is the error.type of a node's error: timeout (no answer within
// the node timeout, or a network timeout), node_down (not sent: the node
// is down), not_sent (the request waited in the node's queue past the node
// timeout, or found the queue full), recovering (see
// redlock.WithRestartDelay), misconfigured (see redlock.ErrMisconfigured),
// network (the connection failed), the prefix of a Redis error reply (ERR,
// LOADING, READONLY...), or _OTHER.
func ErrorType(err error) string {
	var netErr net.Error
	var redisErr interface {
		error
		RedisError()
	}
	switch {
	case errors.Is(err, report.ErrNodeDown): // wraps why it went down: first
		return "node_down"
	case errors.Is(err, report.ErrNodeRecovering):
		return "recovering"
	case errors.Is(err, redlock.ErrMisconfigured):
		return "misconfigured"
	case errors.Is(err, report.ErrNodeTimeout), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case netErr != nil, errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "network"
	case errors.As(err, &redisErr):
		return redisPrefix(redisErr.Error())
	case strings.Contains(err.Error(), notSent):
		return "not_sent"
	}
	return "_OTHER"
}

// notSent starts the message of the redlock package's error for a request
// it never sent (unexported there; its test pins the wording).
const notSent = "redlock: request not sent"

// redisPrefix returns the error code that starts a Redis error reply, as
// "ERR" or "LOADING", or "redis" when it starts with none.
func redisPrefix(msg string) string {
	code, _, _ := strings.Cut(msg, " ")
	if code == "" || len(code) > 32 || strings.ToUpper(code) != code || strings.ContainsAny(code, ":.-") {
		return "redis"
	}
	return code
}
