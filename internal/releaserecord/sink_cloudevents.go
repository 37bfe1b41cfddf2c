package releaserecord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	cdevents "github.com/cdevents/sdk-go/pkg/api"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// CloudEventsSink sends events as CloudEvents over HTTP (structured mode)
// to CDEVENTS_SINK.
type CloudEventsSink struct {
	client cloudevents.Client
	target string
}

var _ Sink = (*CloudEventsSink)(nil)

// sendTimeout bounds one event's delivery, so a sink that hangs fails the
// fact rather than holding it.
const sendTimeout = 10 * time.Second

// NewCloudEventsSink sends to target, an http(s) URL.
func NewCloudEventsSink(target string) (*CloudEventsSink, error) {
	p, err := cehttp.New(cehttp.WithTarget(target), cehttp.WithClient(http.Client{Timeout: sendTimeout}))
	if err != nil {
		return nil, fmt.Errorf("CDEVENTS_SINK: %w", err)
	}
	c, err := cloudevents.NewClient(p)
	if err != nil {
		return nil, fmt.Errorf("CDEVENTS_SINK: %w", err)
	}
	return &CloudEventsSink{client: c, target: target}, nil
}

// Mode is emit.
func (s *CloudEventsSink) Mode() Mode { return ModeEmit }

// Send renders ev as a CloudEvent and delivers it; only a 2xx is delivery.
func (s *CloudEventsSink) Send(ctx context.Context, ev cdevents.CDEventV04) error {
	ce, err := cdevents.AsCloudEvent(ev)
	if err != nil {
		return err
	}
	ce.SetType(TypeOf(ev).String())
	ctx = cloudevents.WithEncodingStructured(ctx)
	result := s.client.Send(ctx, *ce)
	if cloudevents.IsACK(result) {
		return nil
	}
	var status *cehttp.Result
	if errors.As(result, &status) {
		return fmt.Errorf("the CDEvents sink answered %d to %s %s", status.StatusCode, ce.Type(), ce.ID())
	}
	return fmt.Errorf("the CDEvents sink: %s %s not delivered: %w", ce.Type(), ce.ID(), result)
}
