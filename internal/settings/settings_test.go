package settings_test

import (
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestReader(t *testing.T) {
	r := settings.New(env(map[string]string{"ADDR": " :9090 ", "INTERVAL": "30s", "RETAIN": "14", "APP_ID": "12345"}))
	if got := r.Address("ADDR", ":8080"); got != ":9090" {
		t.Errorf("ADDR = %q", got)
	}
	if got := r.Address("METRICS_ADDR", "127.0.0.1:0"); got != "127.0.0.1:0" {
		t.Errorf("default address = %q", got)
	}
	if got := r.String("GATE_NAMESPACE", "delivery-system"); got != "delivery-system" {
		t.Errorf("default = %q", got)
	}
	if got := r.Duration("INTERVAL", time.Minute); got != 30*time.Second {
		t.Errorf("INTERVAL = %s", got)
	}
	if got := r.Duration("MISSING", time.Minute); got != time.Minute {
		t.Errorf("default duration = %s", got)
	}
	if got := r.PositiveInt("RETAIN", 0); got != 14 {
		t.Errorf("RETAIN = %d", got)
	}
	if got := r.Int64("APP_ID"); got != 12345 {
		t.Errorf("APP_ID = %d", got)
	}
	if r.Err() != nil {
		t.Fatalf("Err = %v", r.Err())
	}
}

func TestReaderErrorsNameTheFirstVariable(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		read func(*settings.Reader)
		want string
	}{
		{"required", nil, func(r *settings.Reader) { r.Required("VAULT_ADDR") }, "VAULT_ADDR: required but not set"},
		{"duration", map[string]string{"INTERVAL": "often"}, func(r *settings.Reader) { r.Duration("INTERVAL", time.Second) }, `INTERVAL: "often" is not a positive duration such as 30s or 10m`},
		{"negative duration", map[string]string{"INTERVAL": "-1s"}, func(r *settings.Reader) { r.Duration("INTERVAL", time.Second) }, `INTERVAL: "-1s" is not a positive duration such as 30s or 10m`},
		{"zero retain", map[string]string{"BACKUP_RETAIN": "0"}, func(r *settings.Reader) { r.PositiveInt("BACKUP_RETAIN", 0) }, `BACKUP_RETAIN: "0" is not a positive whole number`},
		{"missing retain", nil, func(r *settings.Reader) { r.PositiveInt("BACKUP_RETAIN", 0) }, "BACKUP_RETAIN: required but not set"},
		{"bad id", map[string]string{"GITHUB_APP_ID": "x1"}, func(r *settings.Reader) { r.Int64("GITHUB_APP_ID") }, `GITHUB_APP_ID: "x1" is not a positive whole number`},
		{"missing id", nil, func(r *settings.Reader) { r.Int64("GITHUB_APP_ID") }, "GITHUB_APP_ID: required but not set"},
		{"address without a port", map[string]string{"ADDR": "nonsense"}, func(r *settings.Reader) { r.Address("ADDR", ":8080") }, `ADDR: "nonsense" is not a listen address such as :8080 or 127.0.0.1:8080`},
		{"address with a port too large", map[string]string{"ADDR": ":65536"}, func(r *settings.Reader) { r.Address("ADDR", ":8080") }, `ADDR: ":65536" is not a listen address such as :8080 or 127.0.0.1:8080`},
		{"address with a named port", map[string]string{"ADDR": ":http"}, func(r *settings.Reader) { r.Address("ADDR", ":8080") }, `ADDR: ":http" is not a listen address such as :8080 or 127.0.0.1:8080`},
		{"first wins", nil, func(r *settings.Reader) { r.Required("A"); r.Required("B") }, "A: required but not set"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := settings.New(env(tc.env))
			tc.read(r)
			if r.Err() == nil || r.Err().Error() != tc.want {
				t.Fatalf("Err = %v, want %q", r.Err(), tc.want)
			}
		})
	}
}
