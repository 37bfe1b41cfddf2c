package releaserecord

import (
	"context"
	"log/slog"

	cdevents "github.com/cdevents/sdk-go/pkg/api"
)

// ShadowSink logs each event as one shadow-event line and forwards nothing:
// FACTS_MODE=shadow, to watch what the service would send.
type ShadowSink struct {
	Logger *slog.Logger
}

var _ Sink = ShadowSink{}

// Mode is shadow.
func (ShadowSink) Mode() Mode { return ModeShadow }

// Send logs the event.
func (s ShadowSink) Send(ctx context.Context, ev cdevents.CDEventV04) error {
	s.Logger.LogAttrs(ctx, slog.LevelInfo, "shadow-event",
		slog.String("type", TypeOf(ev).String()), slog.String("id", ev.GetId()),
		slog.String("subject", ev.GetSubjectId()), slog.String("chainId", ev.GetChainId()))
	return nil
}
