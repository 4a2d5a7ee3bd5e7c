package store

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// metrics are the writers' health instruments.
type metrics struct {
	batchOps metric.Int64Histogram
	commit   metric.Float64Histogram
	reg      metric.Registration
	attrs    []metric.MeasurementOption
}

func newMetrics(mp metric.MeterProvider, shards []*shard) (*metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/edictrt/edict/engine/store")
	out := &metrics{}
	var err error
	depth, err := m.Int64ObservableGauge("edict_engine_writer_queue_depth",
		metric.WithDescription("Operations waiting in a shard writer's queue."))
	if err != nil {
		return nil, err
	}
	out.batchOps, err = m.Int64Histogram("edict_engine_writer_batch_ops",
		metric.WithDescription("Operations committed per group-commit transaction of a shard writer."),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384))
	if err != nil {
		return nil, err
	}
	out.commit, err = m.Float64Histogram("edict_engine_writer_commit_seconds",
		metric.WithDescription("Duration of a shard writer's group-commit transaction, fsync included."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		return nil, err
	}
	out.attrs = make([]metric.MeasurementOption, len(shards))
	obs := make([]metric.ObserveOption, len(shards))
	for i := range shards {
		set := attribute.NewSet(attribute.String("shard", strconv.Itoa(i)))
		out.attrs[i] = metric.WithAttributeSet(set)
		obs[i] = metric.WithAttributeSet(set)
	}
	out.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, sh := range shards {
			o.ObserveInt64(depth, int64(len(sh.w.ch)), obs[i])
		}
		return nil
	}, depth)
	if err != nil {
		return nil, err
	}
	return out, nil
}
