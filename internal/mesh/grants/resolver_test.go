package grants

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// answering is a resolver that answers every push with raw, or fails.
type answering struct {
	raw string
	err error
}

func (a answering) RequestWithContext(context.Context, string, []byte) (*nats.Msg, error) {
	if a.err != nil {
		return nil, a.err
	}
	return &nats.Msg{Data: []byte(a.raw)}, nil
}

func TestPush(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		err       error
		want      string // in the error; empty, none
	}{
		{"taken", `{"data":{"account":"A","code":200,"message":"jwt updated"}}`, nil, ""},
		{"refused", `{"error":{"account":"A","code":500,"description":"jwt validation failed"}}`, nil, "refused (500): jwt validation failed"},
		{"an answer that does not decode", `{"error":`, nil, "does not decode"},
		{"no resolver", "", nats.ErrNoResponders, "no responders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Push(context.Background(), answering{raw: tc.raw, err: tc.err}, "jwt")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.err)
			}
		})
	}
}

func FuzzPushAnswer(f *testing.F) {
	f.Add(`{"data":{"code":200}}`)
	f.Add(`{"error":{"code":500,"description":"x"}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		_ = Push(context.Background(), answering{raw: raw}, "jwt")
	})
}
