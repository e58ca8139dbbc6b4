package redlockotel

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// An Option configures an [Observer].
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	mp       metric.MeterProvider // nil: the global one
	tp       trace.TracerProvider // nil: the global one
	lockName bool
}

// WithMeterProvider sets where the metrics go. A nil provider stands for
// the default. Default: the global provider (otel.GetMeterProvider), as
// it is when NewObserver is called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithTracerProvider sets where the spans go. A nil provider stands for
// the default. Default: the global provider (otel.GetTracerProvider), as
// it is when NewObserver is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithLockNameAttribute adds the lock's name, as redlock.lock.name, to the
// points of redlock.acquire.duration, redlock.acquire.attempts,
// redlock.acquire.active, redlock.hold.duration and redlock.lost. Every
// name is then a time series of its own: use it only with a small, fixed
// set of names. Spans carry the name either way. Default: off.
func WithLockNameAttribute() Option {
	return optionFunc(func(c *config) { c.lockName = true })
}
