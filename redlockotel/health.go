package redlockotel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"github.com/redlock-go/redlock/redlock"
)

// ObserveHealth reports the nodes of r, read with [redlock.Redlock.Health]
// whenever the metrics are collected (no I/O), through two gauges with
// server.address: redlock.node.up, 1 while the node is up and 0 while it
// is down (skipped, probed in the background), and
// redlock.node.owed_releases, the releases waiting for the node to answer
// again. Call it once per Redlock, and Unregister the result once r is
// closed. Two Redlocks over the same nodes report the same series.
func (o *Observer) ObserveHealth(r *redlock.Redlock) (metric.Registration, error) {
	up, err := o.meter.Int64ObservableGauge("redlock.node.up", metric.WithUnit("1"),
		metric.WithDescription("1 while the node is up, 0 while it is down and skipped."))
	if err != nil {
		return nil, fmt.Errorf("redlockotel: %w", err)
	}
	owed, err := o.meter.Int64ObservableGauge("redlock.node.owed_releases", metric.WithUnit("{release}"),
		metric.WithDescription("Releases waiting for the node to answer again."))
	if err != nil {
		return nil, fmt.Errorf("redlockotel: %w", err)
	}
	reg, err := o.meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		for _, h := range r.Health() {
			attrs := metric.WithAttributes(ServerAddressKey.String(h.Addr))
			v := int64(1)
			if h.Down {
				v = 0
			}
			obs.ObserveInt64(up, v, attrs)
			obs.ObserveInt64(owed, int64(h.OwedReleases), attrs)
		}
		return nil
	}, up, owed)
	if err != nil {
		return nil, fmt.Errorf("redlockotel: %w", err)
	}
	return reg, nil
}
