package service_test

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	prio "github.com/edictrt/edict/priority"
)

func classOf(ctx context.Context) (string, bool) {
	c, ok := prio.Lookup(ctx)
	return c.String(), ok
}

func attributeKey(k string) attribute.Key { return attribute.Key(k) }
