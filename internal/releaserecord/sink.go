package releaserecord

import (
	"context"

	cdevents "github.com/cdevents/sdk-go/pkg/api"
)

// Sink is where the events of a mode go: the CloudEvents sink in emit mode,
// the log in shadow mode.
type Sink interface {
	// Mode names the sent set the sink's events go in.
	Mode() Mode
	// Send delivers one event; an error means it may not have arrived, and
	// the fact is answered 502 with nothing written.
	Send(ctx context.Context, ev cdevents.CDEventV04) error
}
